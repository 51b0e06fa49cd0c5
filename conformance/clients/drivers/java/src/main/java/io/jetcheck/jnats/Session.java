package io.jetcheck.jnats;

import io.nats.client.AuthHandler;
import io.nats.client.Connection;
import io.nats.client.ConnectionListener;
import io.nats.client.ErrorListener;
import io.nats.client.JetStream;
import io.nats.client.JetStreamManagement;
import io.nats.client.JetStreamOptions;
import io.nats.client.JetStreamSubscription;
import io.nats.client.KeyValueOptions;
import io.nats.client.NKey;
import io.nats.client.Nats;
import io.nats.client.ObjectStoreOptions;
import io.nats.client.Options;
import io.nats.client.support.JsonValue;
import io.nats.client.support.Status;
import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/** One connection of the client (`connect`), its JetStream context and the options its KV and object stores use. */
final class Session {
    final String id;
    final Main d;
    Connection nc;
    JetStream js;
    JetStreamManagement jsm;
    JetStreamOptions jso;
    Options options; // what the connection was made with (a load run's own connection copies it)
    KeyValueOptions kvo;
    ObjectStoreOptions oso;
    /** Fetches in progress, by consumer name: the client reports their missed heartbeats to the connection only. */
    final Map<String, Consumers.FetchWatch> fetches = new ConcurrentHashMap<>();

    private Session(Main d, String id) {
        this.d = d;
        this.id = id;
    }

    static Object connect(Main d, JsonValue req) throws Exception {
        String id = Json.str(req, "session");
        String url = Json.str(req, "url");
        if (id.isEmpty() || url.isEmpty()) {
            throw new Failure("invalid", "connect needs session and url");
        }
        Double waitS = Json.dbl(req, "reconnect_wait_s");
        Duration wait = Duration.ofNanos((long) ((waitS == null ? 0.1 : waitS) * 1e9));
        Session s = new Session(d, id);
        Options.Builder ob = Options.builder()
                .server(url)
                .connectionName("jetcheck-driver-java")
                .maxReconnects(-1)
                // The protocol asks for reconnect_wait_s between attempts, not plus a random jitter. Not through
                // reconnectJitter(Duration.ZERO): jnats then calls ThreadLocalRandom.nextLong(0), whose
                // IllegalArgumentException ends its reconnect thread for good (docs/clients/jnats.md).
                .reconnectDelayHandler(attempt -> wait)
                .errorListener(s.errorListener())
                .connectionListener(s.connectionListener());
        JsonValue creds = Json.get(req, "credentials");
        String user = Json.str(creds, "user");
        if (!user.isEmpty()) {
            ob.userInfo(user.toCharArray(), Json.str(creds, "password").toCharArray());
        }
        String token = Json.str(creds, "token");
        if (!token.isEmpty()) {
            ob.token(token.toCharArray());
        }
        String seedFile = Json.str(creds, "nkey_seed");
        if (!seedFile.isEmpty()) {
            ob.authHandler(nkeyAuth(seedFile));
        }
        String credsFile = Json.str(creds, "creds");
        if (!credsFile.isEmpty()) {
            ob.authHandler(Nats.credentials(credsFile));
        }
        String ca = Json.str(creds, "tls_ca");
        String cert = Json.str(creds, "tls_cert");
        String key = Json.str(creds, "tls_key");
        if (!ca.isEmpty() || !cert.isEmpty()) {
            ob.sslContext(sslContext(ca, cert, key));
        }
        String inbox = Json.str(req, "inbox_prefix");
        if (!inbox.isEmpty()) {
            ob.inboxPrefix(inbox);
        }
        try {
            s.options = ob.build();
            s.nc = Nats.connect(s.options);
        } catch (Exception e) {
            Failure f = Failure.classify(e);
            throw f.kind.equals("other") ? new Failure("connection", f.getMessage()) : f;
        }
        JetStreamOptions.Builder jb = JetStreamOptions.builder();
        String prefix = Json.str(req, "api_prefix");
        if (!prefix.isEmpty()) {
            jb.prefix(prefix);
        }
        s.jso = jb.build();
        s.js = s.nc.jetStream(s.jso);
        s.jsm = s.nc.jetStreamManagement(s.jso);
        s.kvo = KeyValueOptions.builder(s.jso).build();
        s.oso = ObjectStoreOptions.builder(s.jso).build();
        Session old = d.sessions.put(id, s);
        if (old != null) {
            old.close();
        }
        Log.log("session " + id + ": connected to " + s.nc.getConnectedUrl());
        return null;
    }

    void ping() throws Exception {
        nc.flush(Duration.ofMillis(Main.API_TIMEOUT_MS));
    }

    void close() {
        try {
            nc.close();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The running subs of this session a client report about `jsSub` concerns: those of its consumer, else all. */
    private List<Sub> concerned(JetStreamSubscription jsSub) {
        String consumer = null;
        try {
            consumer = jsSub == null ? null : jsSub.getConsumerName();
        } catch (RuntimeException ignored) {
            // the subscription was already gone
        }
        List<Sub> mine = new ArrayList<>();
        List<Sub> named = new ArrayList<>();
        for (Sub sub : d.subs.values()) {
            if (sub.session.equals(id) && sub.running()) {
                mine.add(sub);
                if (consumer != null && sub.owns(jsSub, consumer)) {
                    named.add(sub);
                }
            }
        }
        return named.isEmpty() ? mine : named;
    }

    private ErrorListener errorListener() {
        return new ErrorListener() {
            @Override
            public void heartbeatAlarm(Connection conn, JetStreamSubscription sub, long lastStreamSequence,
                                       long lastConsumerSequence) {
                String detail = "ErrorListener.heartbeatAlarm: lastStreamSequence " + lastStreamSequence
                        + ", lastConsumerSequence " + lastConsumerSequence;
                String consumer = consumerOf(sub);
                Consumers.FetchWatch fetch = consumer == null ? null : fetches.get(consumer);
                if (fetch != null) {
                    fetch.alarm(detail);
                    return;
                }
                for (Sub s : concerned(sub)) {
                    s.missedHeartbeat(detail);
                }
            }

            @Override
            public void pullStatusError(Connection conn, JetStreamSubscription sub, Status status) {
                report(sub, "ErrorListener.pullStatusError: " + status);
            }

            @Override
            public void pullStatusWarning(Connection conn, JetStreamSubscription sub, Status status) {
                report(sub, "ErrorListener.pullStatusWarning: " + status);
            }

            @Override
            public void unhandledStatus(Connection conn, JetStreamSubscription sub, Status status) {
                report(sub, "ErrorListener.unhandledStatus: " + status);
            }

            @Override
            public void errorOccurred(Connection conn, String error) {
                d.event(id, null, "error", "ErrorListener.errorOccurred: " + error);
            }

            @Override
            public void exceptionOccurred(Connection conn, Exception exp) {
                Log.log("session " + id + ": " + Failure.describe(exp));
            }
        };
    }

    private static String consumerOf(JetStreamSubscription sub) {
        try {
            return sub == null ? null : sub.getConsumerName();
        } catch (RuntimeException e) {
            return null;
        }
    }

    private void report(JetStreamSubscription sub, String detail) {
        String consumer = consumerOf(sub);
        if (consumer != null && fetches.containsKey(consumer)) {
            return; // a fetch reports how it ended in its own answer
        }
        Collection<Sub> concerned = concerned(sub);
        if (concerned.isEmpty()) {
            d.event(id, null, "error", detail);
        }
        for (Sub s : concerned) {
            d.event(id, s.id, "error", detail);
        }
    }

    private ConnectionListener connectionListener() {
        return (conn, type) -> Log.log("session " + id + ": " + type);
    }

    /** An nkey seed file as the client's AuthHandler (jnats has no nkey-file option of its own). */
    private static AuthHandler nkeyAuth(String seedFile) throws Exception {
        char[] seed = new String(Files.readAllBytes(Path.of(seedFile)), StandardCharsets.UTF_8).trim().toCharArray();
        NKey nkey = NKey.fromSeed(seed);
        return new AuthHandler() {
            @Override
            public byte[] sign(byte[] nonce) {
                try {
                    return nkey.sign(nonce);
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            }

            @Override
            public char[] getID() {
                try {
                    return nkey.getPublicKey();
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            }

            @Override
            public char[] getJWT() {
                return null;
            }
        };
    }

    /** PEM files (jnats reads only key stores) as an SSLContext: the CA to trust, the client's cert and key. */
    private static SSLContext sslContext(String ca, String cert, String key) throws Exception {
        CertificateFactory cf = CertificateFactory.getInstance("X.509");
        TrustManagerFactory tmf = null;
        if (!ca.isEmpty()) {
            KeyStore trust = KeyStore.getInstance(KeyStore.getDefaultType());
            trust.load(null, null);
            int i = 0;
            for (Certificate c : cf.generateCertificates(new ByteArrayInputStream(Files.readAllBytes(Path.of(ca))))) {
                trust.setCertificateEntry("ca" + i++, c);
            }
            tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            tmf.init(trust);
        }
        KeyManagerFactory kmf = null;
        if (!cert.isEmpty()) {
            String pem = Files.readString(Path.of(key));
            if (!pem.contains("BEGIN PRIVATE KEY")) {
                throw new Failure("unsupported", "the jnats driver reads PKCS#8 client keys only (BEGIN PRIVATE KEY)");
            }
            String body = pem.replaceAll("-----[A-Z ]+-----", "").replaceAll("\\s", "");
            byte[] der = Base64.getDecoder().decode(body);
            PrivateKey pk;
            try {
                pk = KeyFactory.getInstance("RSA").generatePrivate(new PKCS8EncodedKeySpec(der));
            } catch (Exception e) {
                pk = KeyFactory.getInstance("EC").generatePrivate(new PKCS8EncodedKeySpec(der));
            }
            Collection<? extends Certificate> chain = cf.generateCertificates(
                    new ByteArrayInputStream(Files.readAllBytes(Path.of(cert))));
            KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
            ks.load(null, null);
            ks.setKeyEntry("client", pk, new char[0], chain.toArray(new Certificate[0]));
            kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
            kmf.init(ks, new char[0]);
        }
        SSLContext ctx = SSLContext.getInstance("TLSv1.2");
        ctx.init(kmf == null ? null : kmf.getKeyManagers(), tmf == null ? null : tmf.getTrustManagers(), null);
        return ctx;
    }
}

// Sessions (../PROTOCOL.md "Ops (v1)": connect, ping, close): one nats.go connection and its JetStream context each.

package main

import (
	"context"
	"log"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type session struct {
	id string
	nc *nats.Conn
	js jetstream.JetStream
}

func credential(creds map[string]*string, key string) string {
	if v, ok := creds[key]; ok && v != nil {
		return *v
	}
	return ""
}

func (d *driver) connect(req *request) (any, error) {
	if req.Session == "" || req.URL == "" {
		return nil, failure("invalid", "connect needs session and url")
	}
	wait := 100 * time.Millisecond
	if req.ReconnectWaitS != nil {
		wait = seconds(*req.ReconnectWaitS)
	}
	id := req.Session
	opts := []nats.Option{
		nats.Name("jetcheck-driver-go"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(wait),
		// The protocol asks for reconnect_wait_s between attempts, not reconnect_wait_s plus a random jitter.
		nats.ReconnectJitter(0, 0),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil && strings.HasPrefix(sub.Subject, pullRequestSubject) {
				// The driver's own look at pull requests (watchPullRequests), not the client's report.
				log.Printf("session %s: watching pull requests: %v", id, err)
				return
			}
			d.event(id, "", "error", describe(err))
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { log.Printf("session %s: disconnected: %v", id, err) }),
		nats.ReconnectHandler(func(*nats.Conn) { log.Printf("session %s: reconnected", id) }),
	}
	c := req.Credentials
	if user := credential(c, "user"); user != "" {
		opts = append(opts, nats.UserInfo(user, credential(c, "password")))
	}
	if token := credential(c, "token"); token != "" {
		opts = append(opts, nats.Token(token))
	}
	if seed := credential(c, "nkey_seed"); seed != "" {
		opt, err := nats.NkeyOptionFromSeed(seed)
		if err != nil {
			return nil, failure("invalid", "nkey seed file unusable: %v", err)
		}
		opts = append(opts, opt)
	}
	if creds := credential(c, "creds"); creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	if ca := credential(c, "tls_ca"); ca != "" {
		opts = append(opts, nats.RootCAs(ca))
	}
	if cert, key := credential(c, "tls_cert"), credential(c, "tls_key"); cert != "" || key != "" {
		opts = append(opts, nats.ClientCert(cert, key))
	}
	opts = append(opts, inboxOption(req.InboxPrefix)...)
	nc, err := nats.Connect(req.URL, opts...)
	if err != nil {
		f := classify(err)
		if f.Kind == "other" {
			f.Kind = "connection"
		}
		return nil, f
	}
	js, err := newJetStream(nc, req.APIPrefix)
	if err != nil {
		nc.Close()
		return nil, err
	}
	d.mu.Lock()
	old := d.sessions[id]
	d.sessions[id] = &session{id: id, nc: nc, js: js}
	d.mu.Unlock()
	if old != nil {
		old.nc.Close()
	}
	log.Printf("session %s: connected to %s", id, nc.ConnectedUrlRedacted())
	return nil, nil
}

func (d *driver) session(id string) (*session, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.sessions[id]
	if s == nil {
		return nil, failure("invalid", "no session %q", id)
	}
	return s, nil
}

// inSession calls call with the session named sessionID and a context that bounds the call to timeout.
func (d *driver) inSession(sessionID string, timeout time.Duration, call func(ctx context.Context, s *session) (any, error)) (any, error) {
	s, err := d.session(sessionID)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return call(ctx, s)
}

// ping answers once the session's connection made a round trip to the server: jetcheck asks after a silence, to
// tell a quiet client from one that lost its server.
func (d *driver) ping(id string) (any, error) {
	s, err := d.session(id)
	if err != nil {
		return nil, err
	}
	return nil, s.nc.FlushTimeout(apiTimeout)
}

func (d *driver) closeSession(id string) (any, error) {
	d.mu.Lock()
	s := d.sessions[id]
	delete(d.sessions, id)
	var mine []*subscription
	for subID, sub := range d.subs {
		if sub.session == id {
			mine = append(mine, sub)
			delete(d.subs, subID)
		}
	}
	d.mu.Unlock()
	if s == nil {
		return nil, failure("invalid", "no session %q", id)
	}
	for _, sub := range mine {
		sub.stop()
	}
	s.nc.Close()
	return nil, nil
}

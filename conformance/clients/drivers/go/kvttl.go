// ADR-48 (KV limit markers and per-key TTLs) and ADR-8's key filters and bucket management through
// jetstream.KeyValue / jetstream.KeyValueManager. See ../PROTOCOL.md, "v2: KV" (ADR-48, key filters, buckets).

package main

import (
	"context"
	"errors"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

func init() {
	// misbehave modes for the proofs of the rules below (PROTOCOL.md, "v2: KV")
	for _, m := range []string{"kv-ttl-ignored", "kv-markers-as-values", "kv-keys-unfiltered", "kv-buckets-misreport"} {
		knownModes[m] = true
	}
}

// limitMarkers sets KeyValueConfig.LimitMarkerTTL when the request asks for limit markers.
func (d *driver) limitMarkers(cfg *jetstream.KeyValueConfig, args kvRequest) {
	if args.LimitMarkerTTLS != nil && !d.mode("kv-ttl-ignored") {
		cfg.LimitMarkerTTL = seconds(*args.LimitMarkerTTLS)
	}
}

// keyTTL is Create's jetstream.KeyTTL option when the request gives a per-key TTL.
func (d *driver) keyTTL(args kvRequest) []jetstream.KVCreateOpt {
	if args.KeyTTLS == nil || d.mode("kv-ttl-ignored") {
		return nil
	}
	return []jetstream.KVCreateOpt{jetstream.KeyTTL(seconds(*args.KeyTTLS))}
}

// purgeTTL is Purge's jetstream.PurgeTTL option when the request gives the marker's TTL.
func (d *driver) purgeTTL(args kvRequest) []jetstream.KVDeleteOpt {
	if args.KeyTTLS == nil || d.mode("kv-ttl-ignored") {
		return nil
	}
	return []jetstream.KVDeleteOpt{jetstream.PurgeTTL(seconds(*args.KeyTTLS))}
}

// listKeys is ListKeysFiltered(filters...) when the request names filters, else ListKeys.
func (d *driver) listKeys(ctx context.Context, kv jetstream.KeyValue, args kvRequest) (jetstream.KeyLister, error) {
	if len(args.Filters) > 0 && !d.mode("kv-keys-unfiltered") {
		return kv.ListKeysFiltered(ctx, args.Filters...)
	}
	return kv.ListKeys(ctx)
}

// markerAsValue answers a get the client refused: as it is, or under kv-markers-as-values with the key's latest
// message (its delete, purge or limit marker) handed over as a value, as a client that ignores markers would.
func (d *driver) markerAsValue(ctx context.Context, s *session, args kvRequest, err error) (any, error) {
	if !d.mode("kv-markers-as-values") {
		return nil, err
	}
	stream, serr := s.js.Stream(ctx, "KV_"+args.Bucket)
	if serr != nil {
		return nil, err
	}
	msg, merr := stream.GetLastMsgForSubject(ctx, "$KV."+args.Bucket+"."+args.Key)
	if merr != nil {
		return nil, err
	}
	return map[string]any{"entry": map[string]any{
		"bucket": args.Bucket, "key": args.Key, "value_b64": "", "revision": msg.Sequence, "operation": "PUT",
		"created": msg.Time.UTC().Format("2006-01-02T15:04:05.999999999Z07:00"),
	}}, nil
}

// kvShown is a watched entry as the driver streams it: kv-markers-as-values reports every marker as a PUT.
func (d *driver) kvShown(e jetstream.KeyValueEntry) map[string]any {
	record := kvEntry(e)
	if d.mode("kv-markers-as-values") {
		record["operation"] = "PUT"
	}
	return record
}

// kvDeleteBucket is the client's DeleteKeyValue (kv-buckets-misreport: answered without calling it).
func (d *driver) kvDeleteBucket(ctx context.Context, s *session, args kvRequest) (any, error) {
	if d.mode("kv-buckets-misreport") {
		return nil, nil
	}
	err := s.js.DeleteKeyValue(ctx, args.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, failure("not_found", "%s", describe(err, namedError{"jetstream.ErrBucketNotFound", jetstream.ErrBucketNotFound}))
	}
	return nil, err
}

// kvBucketNames is the client's KeyValueStoreNames lister, read to its end (kv-buckets-misreport: the streams'
// names, KV_ prefix and all).
func (d *driver) kvBucketNames(req *request) (any, error) {
	s, err := d.session(req.Session)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
	defer cancel()
	lister := s.js.KeyValueStoreNames(ctx)
	names := []string{}
	for name := range lister.Name() {
		if d.mode("kv-buckets-misreport") && !strings.HasPrefix(name, "KV_") {
			name = "KV_" + name
		}
		names = append(names, name)
	}
	if err := lister.Error(); err != nil {
		return nil, err
	}
	return map[string]any{"names": names}, nil
}

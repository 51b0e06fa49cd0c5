//jetcheck:feature kv
//jetcheck:ops kv_create kv_put kv_create_key kv_update kv_get kv_delete kv_purge kv_keys kv_history kv_status
//jetcheck:ops kv_delete_bucket kv_bucket_names

// v2: KV (ADR-8) through jetstream.KeyValue, with ADR-48's TTLs (kvttl.go) and key filters (kvkeys.go) where the
// release has them. See ../PROTOCOL.md, "v2: KV".

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func init() {
	handles((*driver).kv, "kv_create", "kv_put", "kv_create_key", "kv_update", "kv_get", "kv_delete", "kv_purge",
		"kv_keys", "kv_history", "kv_status", "kv_delete_bucket", "kv_bucket_names")
	// misbehave modes for the proofs of the KV rules (PROTOCOL.md, "v2: KV")
	for _, m := range []string{"kv-ttl-ignored", "kv-markers-as-values", "kv-keys-unfiltered", "kv-buckets-misreport"} {
		knownModes[m] = true
	}
}

// kvTTLCalls are ADR-48's calls (kvttl.go); nil in a release without them.
type kvTTLCalls struct {
	limitMarkers func(cfg *jetstream.KeyValueConfig, ttl time.Duration)
	create       func(ctx context.Context, kv jetstream.KeyValue, key string, value []byte, ttl time.Duration) (uint64, error)
	purge        func(ctx context.Context, kv jetstream.KeyValue, key string, ttl time.Duration) error
	markerTTL    func(status jetstream.KeyValueStatus) time.Duration
}

var (
	kvTTL *kvTTLCalls
	// listKeys is ListKeys / ListKeysFiltered (kvkeys.go); nil in a release with only Keys
	listKeys func(ctx context.Context, kv jetstream.KeyValue, filters []string) ([]string, error)
)

// ttlAsked is the TTL a request gives, unless kv-ttl-ignored drops it; ok is false when none is to be passed.
func (d *driver) ttlAsked(ttlS *float64) (ttl time.Duration, ok bool) {
	if ttlS == nil || d.mode("kv-ttl-ignored") {
		return 0, false
	}
	return seconds(*ttlS), true
}

const kvTimeout = 20 * time.Second

type kvRequest struct {
	Bucket   string   `json:"bucket"`
	Key      string   `json:"key"`
	ValueB64 string   `json:"value_b64"`
	Last     uint64   `json:"last"`
	History  *int     `json:"history"`
	TTLS     *float64 `json:"ttl_s"`
	// ADR-48 and ADR-8 key filters (kvttl.go)
	LimitMarkerTTLS *float64 `json:"limit_marker_ttl_s"`
	KeyTTLS         *float64 `json:"key_ttl_s"`
	Filters         []string `json:"filters"`
}

func kvEntry(e jetstream.KeyValueEntry) map[string]any {
	return map[string]any{
		"bucket":    e.Bucket(),
		"key":       e.Key(),
		"value_b64": base64.StdEncoding.EncodeToString(e.Value()),
		"revision":  e.Revision(),
		"operation": kvOperation(e.Operation()),
		"created":   e.Created().UTC().Format(time.RFC3339Nano),
	}
}

func kvOperation(op jetstream.KeyValueOp) string {
	switch op {
	case jetstream.KeyValueDelete:
		return "DEL"
	case jetstream.KeyValuePurge:
		return "PURGE"
	}
	return "PUT"
}

func notFound(err error) error {
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return failure("not_found", "%s", describe(err, keyErrors...))
	}
	return err
}

// keyErrors name the client's KV errors (ErrKeyDeleted before ErrKeyNotFound, which it wraps).
var keyErrors = []namedError{
	{"jetstream.ErrKeyDeleted", jetstream.ErrKeyDeleted},
	{"jetstream.ErrKeyNotFound", jetstream.ErrKeyNotFound},
}

func (d *driver) kv(req *request) (any, error) {
	var args kvRequest
	if err := json.Unmarshal(req.Raw, &args); err != nil {
		return nil, failure("invalid", "unreadable %s request: %v", req.Op, err)
	}
	if req.Op == "kv_bucket_names" {
		return d.inSession(req.Session, kvTimeout, d.kvBucketNames)
	}
	if args.Bucket == "" {
		return nil, failure("invalid", "%s needs \"bucket\"", req.Op)
	}
	return d.inSession(req.Session, kvTimeout, func(ctx context.Context, s *session) (any, error) {
		return d.kvOp(ctx, s, req.Op, args)
	})
}

// kvOp is KV op `op` on the bucket args names.
func (d *driver) kvOp(ctx context.Context, s *session, op string, args kvRequest) (any, error) {
	if op == "kv_create" {
		cfg := jetstream.KeyValueConfig{Bucket: args.Bucket}
		if args.History != nil {
			if *args.History < 0 || *args.History > 255 {
				return nil, failure("invalid", "history %d does not fit KeyValueConfig.History (uint8)", *args.History)
			}
			cfg.History = uint8(*args.History)
		}
		if args.TTLS != nil {
			cfg.TTL = seconds(*args.TTLS)
		}
		if ttl, ok := d.ttlAsked(args.LimitMarkerTTLS); ok {
			if kvTTL == nil {
				return nil, lacking("kv-ttl")
			}
			kvTTL.limitMarkers(&cfg, ttl)
		}
		_, err := s.js.CreateKeyValue(ctx, cfg)
		return nil, err
	}
	if op == "kv_delete_bucket" {
		return d.kvDeleteBucket(ctx, s, args)
	}
	kv, err := s.js.KeyValue(ctx, args.Bucket)
	if err != nil {
		return nil, err
	}
	value, err := base64.StdEncoding.DecodeString(args.ValueB64)
	if err != nil {
		return nil, failure("invalid", "value_b64: %v", err)
	}
	revision := func(rev uint64, err error) (any, error) {
		if err != nil {
			return nil, err
		}
		return map[string]any{"revision": rev}, nil
	}
	switch op {
	case "kv_put":
		if d.mode(kvPrefixIgnored) {
			return revision(putUnprefixed(ctx, s, args.Bucket, args.Key, value))
		}
		return revision(kv.Put(ctx, args.Key, value))
	case "kv_create_key":
		if ttl, ok := d.ttlAsked(args.KeyTTLS); ok {
			if kvTTL == nil {
				return nil, lacking("kv-ttl")
			}
			return revision(kvTTL.create(ctx, kv, args.Key, value, ttl))
		}
		return revision(kv.Create(ctx, args.Key, value))
	case "kv_update":
		return revision(kv.Update(ctx, args.Key, value, args.Last))
	case "kv_get":
		entry, err := kv.Get(ctx, args.Key)
		if err != nil {
			return d.markerAsValue(ctx, s, args, notFound(err))
		}
		return map[string]any{"entry": kvEntry(entry)}, nil
	case "kv_delete":
		return nil, kv.Delete(ctx, args.Key)
	case "kv_purge":
		if ttl, ok := d.ttlAsked(args.KeyTTLS); ok {
			if kvTTL == nil {
				return nil, lacking("kv-ttl")
			}
			return nil, kvTTL.purge(ctx, kv, args.Key, ttl)
		}
		return nil, kv.Purge(ctx, args.Key)
	case "kv_keys":
		return d.kvKeys(ctx, kv, args)
	case "kv_status":
		status, err := kv.Status(ctx)
		if err != nil {
			return nil, err
		}
		return map[string]any{
			"bucket": status.Bucket(), "values": status.Values(), "history": status.History(),
			"ttl_s": status.TTL().Seconds(), "limit_marker_ttl_s": limitMarkerTTL(status).Seconds(),
		}, nil
	case "kv_history":
		entries, err := kv.History(ctx, args.Key)
		if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) { // no revisions at all: an empty history
			return nil, err
		}
		records := []map[string]any{}
		for _, e := range entries {
			records = append(records, kvEntry(e))
		}
		return map[string]any{"entries": records}, nil
	}
	return nil, failure("unsupported", "op %q is not implemented by the nats.go driver", op)
}

// kvKeys lists the bucket's keys: ListKeys/ListKeysFiltered where the release has them, else its Keys, which takes
// no filters.
func (d *driver) kvKeys(ctx context.Context, kv jetstream.KeyValue, args kvRequest) (any, error) {
	filters := args.Filters
	if d.mode("kv-keys-unfiltered") {
		filters = nil
	}
	var keys []string
	var err error
	switch {
	case listKeys != nil:
		keys, err = listKeys(ctx, kv, filters)
	case len(filters) > 0:
		return nil, lacking("kv-key-lister")
	default:
		keys, err = kv.Keys(ctx)
	}
	if err != nil {
		return nil, err
	}
	if keys == nil {
		keys = []string{}
	}
	return map[string]any{"keys": keys}, nil
}

// limitMarkerTTL is the bucket's limit marker TTL; a release without limit markers has none.
func limitMarkerTTL(status jetstream.KeyValueStatus) time.Duration {
	if kvTTL == nil {
		return 0
	}
	return kvTTL.markerTTL(status)
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
func (d *driver) kvBucketNames(ctx context.Context, s *session) (any, error) {
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

// v2: KV (ADR-8) through jetstream.KeyValue. See ../PROTOCOL.md, "v2: KV".

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

var kvOps = []string{
	"kv_create", "kv_put", "kv_create_key", "kv_update", "kv_get", "kv_delete", "kv_purge", "kv_keys", "kv_history",
	"kv_status", "kv_delete_bucket", "kv_bucket_names",
}

func init() { implementedOps = append(implementedOps, kvOps...) }

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
		return d.kvBucketNames(req)
	}
	if args.Bucket == "" {
		return nil, failure("invalid", "%s needs \"bucket\"", req.Op)
	}
	s, err := d.session(req.Session)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
	defer cancel()
	if req.Op == "kv_create" {
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
		d.limitMarkers(&cfg, args)
		_, err := s.js.CreateKeyValue(ctx, cfg)
		return nil, err
	}
	if req.Op == "kv_delete_bucket" {
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
	switch req.Op {
	case "kv_put":
		if d.mode(kvPrefixIgnored) {
			return revision(putUnprefixed(ctx, s, args.Bucket, args.Key, value))
		}
		return revision(kv.Put(ctx, args.Key, value))
	case "kv_create_key":
		return revision(kv.Create(ctx, args.Key, value, d.keyTTL(args)...))
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
		return nil, kv.Purge(ctx, args.Key, d.purgeTTL(args)...)
	case "kv_keys":
		lister, err := d.listKeys(ctx, kv, args)
		if err != nil {
			return nil, err
		}
		keys := []string{}
		for key := range lister.Keys() {
			keys = append(keys, key)
		}
		return map[string]any{"keys": keys}, nil
	case "kv_status":
		status, err := kv.Status(ctx)
		if err != nil {
			return nil, err
		}
		return map[string]any{
			"bucket": status.Bucket(), "values": status.Values(), "history": status.History(),
			"ttl_s": status.TTL().Seconds(), "limit_marker_ttl_s": status.LimitMarkerTTL().Seconds(),
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
	return nil, failure("unsupported", "op %q is not implemented by the nats.go driver", req.Op)
}

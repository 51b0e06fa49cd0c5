//jetcheck:feature kv-ttl

// ADR-48 (KV limit markers and per-key TTLs, nats.go's KeyValueConfig.LimitMarkerTTL, KeyTTL and PurgeTTL), for
// kv.go's kv_create, kv_create_key, kv_purge and kv_status. See ../PROTOCOL.md, "v2: KV".

package main

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func init() {
	kvTTL = &kvTTLCalls{
		limitMarkers: func(cfg *jetstream.KeyValueConfig, ttl time.Duration) { cfg.LimitMarkerTTL = ttl },
		create: func(ctx context.Context, kv jetstream.KeyValue, key string, value []byte, ttl time.Duration) (uint64, error) {
			return kv.Create(ctx, key, value, jetstream.KeyTTL(ttl))
		},
		purge: func(ctx context.Context, kv jetstream.KeyValue, key string, ttl time.Duration) error {
			return kv.Purge(ctx, key, jetstream.PurgeTTL(ttl))
		},
		markerTTL: func(status jetstream.KeyValueStatus) time.Duration { return status.LimitMarkerTTL() },
	}
}

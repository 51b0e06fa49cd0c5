//jetcheck:feature kv-watch-filtered

// KeyValue.WatchFiltered: a watch of several key filters (kvwatch.go).

package main

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

func init() {
	watchFiltered = func(ctx context.Context, kv jetstream.KeyValue, keys []string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
		return kv.WatchFiltered(ctx, keys, opts...)
	}
}

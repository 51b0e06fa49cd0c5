//jetcheck:feature kv-key-lister

// KeyValue.ListKeys and ListKeysFiltered (ADR-8's key filters), for kv.go's kv_keys.

package main

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

func init() {
	listKeys = func(ctx context.Context, kv jetstream.KeyValue, filters []string) ([]string, error) {
		var lister jetstream.KeyLister
		var err error
		if len(filters) > 0 {
			lister, err = kv.ListKeysFiltered(ctx, filters...)
		} else {
			lister, err = kv.ListKeys(ctx)
		}
		if err != nil {
			return nil, err
		}
		keys := []string{}
		for key := range lister.Keys() {
			keys = append(keys, key)
		}
		return keys, nil
	}
}

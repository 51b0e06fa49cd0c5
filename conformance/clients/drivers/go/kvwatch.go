//jetcheck:feature kv-watch
//jetcheck:ops kv_watch

// kv_watch over jetstream.KeyValue.Watch / WatchAll, and WatchFiltered (kvwatchfiltered.go) for several filters.
// See ../PROTOCOL.md "v3: watch".

package main

import (
	"context"
	"encoding/json"

	"github.com/nats-io/nats.go/jetstream"
)

func init() {
	handles((*driver).kvWatch, "kv_watch")
	knownModes["kv-watch-meta-ignored"] = true
}

// watchFiltered is KeyValue.WatchFiltered (kvwatchfiltered.go); nil in a release without it.
var watchFiltered func(ctx context.Context, kv jetstream.KeyValue, keys []string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error)

type kvWatchRequest struct {
	watchOptions
	Bucket string   `json:"bucket"`
	Keys   []string `json:"keys"`
}

// metaOnly is the meta_only the client is asked for: kv-watch-meta-ignored drops it, so the watcher sends values,
// as a client that ignores MetaOnly would.
func (d *driver) metaOnly(asked bool) bool { return asked && !d.mode("kv-watch-meta-ignored") }

func (d *driver) kvWatch(req *request) (any, error) {
	var args kvWatchRequest
	if err := json.Unmarshal(req.Raw, &args); err != nil {
		return nil, failure("invalid", "unreadable kv_watch request: %v", err)
	}
	if args.Bucket == "" {
		return nil, failure("invalid", "kv_watch needs \"bucket\"")
	}
	args.MetaOnly = d.metaOnly(args.MetaOnly)
	return nil, startWatch(d, req.Session, req.Sub, "entry", func(ctx context.Context, s *session) (updatesWatcher[jetstream.KeyValueEntry], error) {
		kv, err := s.js.KeyValue(ctx, args.Bucket)
		if err != nil {
			return nil, err
		}
		keys := append([]string(nil), args.Keys...) // WatchFiltered rewrites its slice in place
		switch len(keys) {
		case 0:
			return kv.WatchAll(ctx, args.options()...)
		case 1:
			return kv.Watch(ctx, keys[0], args.options()...)
		}
		if watchFiltered == nil { // kvwatchfiltered.go, left out of this release's build
			return nil, lacking("kv-watch-filtered")
		}
		return watchFiltered(ctx, kv, keys, args.options()...)
	}, func(e jetstream.KeyValueEntry) any {
		if e == nil {
			return nil
		}
		return d.kvShown(e)
	})
}

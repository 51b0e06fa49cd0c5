//jetcheck:feature object-watch
//jetcheck:ops obj_watch

// obj_watch over jetstream.ObjectStore.Watch. See ../PROTOCOL.md "v3: watch".

package main

import (
	"context"
	"encoding/json"

	"github.com/nats-io/nats.go/jetstream"
)

func init() { handles((*driver).objWatch, "obj_watch") }

type objWatchRequest struct {
	watchOptions
	Bucket string `json:"bucket"`
	Sub    string `json:"sub"`
}

func (d *driver) objWatch(req *request) (any, error) {
	var args objWatchRequest
	if len(req.Obj) == 0 || json.Unmarshal(req.Obj, &args) != nil || args.Bucket == "" {
		return nil, failure("invalid", "obj_watch needs \"obj\" with a \"bucket\"")
	}
	if args.MetaOnly {
		return nil, failure("invalid", "obj_watch has no meta_only (the protocol's obj_watch options are "+
			"include_history, updates_only and ignore_deletes)")
	}
	return nil, startWatch(d, req.Session, args.Sub, "info", func(ctx context.Context, s *session) (updatesWatcher[*jetstream.ObjectInfo], error) {
		store, err := s.js.ObjectStore(ctx, args.Bucket)
		if err != nil {
			return nil, objectError(err)
		}
		return store.Watch(ctx, args.options()...)
	}, func(info *jetstream.ObjectInfo) any {
		if info == nil {
			return nil
		}
		return info
	})
}

// v3: watch (../PROTOCOL.md "v3: watch"): kv_watch over jetstream.KeyValue.Watch/WatchFiltered/WatchAll and
// obj_watch over jetstream.ObjectStore.Watch. The watcher's updates are streamed in the order the client's
// Updates() channel yields them; its nil entry (end of the initial data) becomes a record with a null entry/info.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func init() { implementedOps = append(implementedOps, "kv_watch", "obj_watch") }

type watchOptions struct {
	IncludeHistory bool `json:"include_history"`
	UpdatesOnly    bool `json:"updates_only"`
	IgnoreDeletes  bool `json:"ignore_deletes"`
	MetaOnly       bool `json:"meta_only"`
}

// options are the client's own WatchOpts for what was asked; the client refuses combinations it does not allow
// (IncludeHistory with UpdatesOnly: jetstream.ErrInvalidOption).
func (o watchOptions) options() []jetstream.WatchOpt {
	var opts []jetstream.WatchOpt
	if o.IncludeHistory {
		opts = append(opts, jetstream.IncludeHistory())
	}
	if o.UpdatesOnly {
		opts = append(opts, jetstream.UpdatesOnly())
	}
	if o.IgnoreDeletes {
		opts = append(opts, jetstream.IgnoreDeletes())
	}
	if o.MetaOnly {
		opts = append(opts, jetstream.MetaOnly())
	}
	return opts
}

type kvWatchRequest struct {
	watchOptions
	Bucket string   `json:"bucket"`
	Keys   []string `json:"keys"`
}

type objWatchRequest struct {
	watchOptions
	Bucket string `json:"bucket"`
	Sub    string `json:"sub"`
}

// watchContext lives as long as the watch: the client unsubscribes its watcher when the context given to Watch
// ends (nats.Context), so only the setup is bounded, by cancelling when it takes longer than apiTimeout.
type watchContext struct {
	ctx    context.Context
	cancel context.CancelFunc
	timer  *time.Timer
}

func newWatchContext() *watchContext {
	ctx, cancel := context.WithCancel(context.Background())
	return &watchContext{ctx: ctx, cancel: cancel, timer: time.AfterFunc(apiTimeout, cancel)}
}

// established reports whether the setup finished in time (the context still lives on for the watch).
func (w *watchContext) established() bool { return w.timer.Stop() }

func (d *driver) kvWatch(req *request) (any, error) {
	var args kvWatchRequest
	if err := json.Unmarshal(req.Raw, &args); err != nil {
		return nil, failure("invalid", "unreadable kv_watch request: %v", err)
	}
	if args.Bucket == "" {
		return nil, failure("invalid", "kv_watch needs \"bucket\"")
	}
	args.MetaOnly = d.metaOnly(args.MetaOnly)
	s, sub, err := d.sessionSubscription(req.Session, req.Sub)
	if err != nil {
		return nil, err
	}
	wc := newWatchContext()
	watcher, err := func() (jetstream.KeyWatcher, error) {
		kv, err := s.js.KeyValue(wc.ctx, args.Bucket)
		if err != nil {
			return nil, err
		}
		keys := append([]string(nil), args.Keys...) // WatchFiltered rewrites its slice in place
		switch len(keys) {
		case 0:
			return kv.WatchAll(wc.ctx, args.options()...)
		case 1:
			return kv.Watch(wc.ctx, keys[0], args.options()...)
		}
		return kv.WatchFiltered(wc.ctx, keys, args.options()...)
	}()
	if err = d.watchStarted(sub, wc, watcher, err); err != nil {
		return nil, err
	}
	go streamWatch(sub, watcher.Updates(), "entry", func(e jetstream.KeyValueEntry) any {
		if e == nil {
			return nil
		}
		return d.kvShown(e)
	})
	return nil, nil
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
	s, sub, err := d.sessionSubscription(req.Session, args.Sub)
	if err != nil {
		return nil, err
	}
	wc := newWatchContext()
	watcher, err := func() (jetstream.ObjectWatcher, error) {
		store, err := s.js.ObjectStore(wc.ctx, args.Bucket)
		if err != nil {
			return nil, objectError(err)
		}
		return store.Watch(wc.ctx, args.options()...)
	}()
	if err = d.watchStarted(sub, wc, watcher, err); err != nil {
		return nil, err
	}
	go streamWatch(sub, watcher.Updates(), "info", func(info *jetstream.ObjectInfo) any {
		if info == nil {
			return nil
		}
		return info
	})
	return nil, nil
}

// watchStarted finishes a watch's setup: on failure the sub is forgotten and the context ended; on success the
// sub's stop ends the client's watcher and the context.
func (d *driver) watchStarted(sub *subscription, wc *watchContext, watcher interface{ Stop() error }, err error) error {
	inTime := wc.established()
	if err == nil && !inTime {
		err = failure("timeout", "the client's Watch took longer than %s", apiTimeout)
	}
	if err != nil {
		wc.cancel()
		d.forget(sub)
		return err
	}
	var once sync.Once
	sub.mu.Lock()
	stopped := sub.stopped
	sub.stopWatch = func() {
		once.Do(func() {
			if err := watcher.Stop(); err != nil {
				log.Printf("sub %s: stopping the watcher: %v", sub.id, err)
			}
			wc.cancel()
		})
	}
	sub.mu.Unlock()
	if stopped { // stopped while the client was still setting up
		sub.stopWatch()
	}
	return nil
}

// streamWatch streams what the client's Updates() channel yields until the client closes it. It keeps reading
// after a stop (streaming nothing), so the client's callback never blocks on a full channel.
func streamWatch[T any](sub *subscription, updates <-chan T, field string, encode func(T) any) {
	d := sub.d
	updateSeen := false
	for update := range updates {
		payload := encode(update)
		sub.mu.Lock()
		switch {
		case sub.stopped:
		case payload == nil && d.mode("watch-no-end-of-data"):
		case payload != nil && !updateSeen && d.mode("watch-drop-first"):
			updateSeen = true
		default:
			updateSeen = updateSeen || payload != nil
			d.write(map[string]any{"type": "watch", "sub": sub.id, field: payload, "at_ns": monoNs()})
		}
		sub.mu.Unlock()
	}
	sub.mu.Lock()
	ended := !sub.stopped
	sub.mu.Unlock()
	if ended {
		d.event(sub.session, sub.id, "terminal", fmt.Sprintf(
			"the client closed the watcher's Updates() channel (%s watch) without Stop", field))
		sub.stop()
		d.forget(sub)
	}
}

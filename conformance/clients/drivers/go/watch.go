//jetcheck:feature watch

// v3: watch (../PROTOCOL.md "v3: watch"), what kv_watch (kvwatch.go) and obj_watch (objwatch.go) share: the
// client's WatchOpts, the watch's context, and streaming. The watcher's updates are streamed in the order the
// client's Updates() channel yields them; its nil entry (end of the initial data) becomes a null entry/info.

package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

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

// updatesWatcher is what the client's KeyWatcher and ObjectWatcher both are: a channel of updates and a Stop.
type updatesWatcher[T any] interface {
	Updates() <-chan T
	Stop() error
}

// startWatch registers sub subID of session sessionID, opens the client's watcher (`open`, bounded by apiTimeout
// through the watch's context) and streams its updates as `field`, each shown by encode (nil: the end of the
// initial data).
func startWatch[T any](d *driver, sessionID, subID, field string,
	open func(ctx context.Context, s *session) (updatesWatcher[T], error), encode func(T) any,
) error {
	s, sub, err := d.sessionSubscription(sessionID, subID)
	if err != nil {
		return err
	}
	wc := newWatchContext()
	watcher, err := open(wc.ctx, s)
	if err = d.watchStarted(sub, wc, watcher, err); err != nil {
		return err
	}
	go streamWatch(sub, watcher.Updates(), field, encode)
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

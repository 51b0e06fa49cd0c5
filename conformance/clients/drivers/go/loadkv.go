//jetcheck:feature load-kv
//jetcheck:ops load_kv

// Load: KV puts and gets for `jetcheck load --client nats.go --scenario kv`. See ../PROTOCOL.md, "Load".

package main

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func init() { handles(loading((*driver).loadKV), "load_kv") }

// --- kv: put then get of the same key, on a schedule ----------------------------------------------------------------

const (
	kvRowSlots  = 8 // op, key, intended_ns, sent_ns, done_ns, revision, error, err_code
	kvOpPut     = 0
	kvOpGet     = 1
	kvOpTimeout = 10 * time.Second
)

type kvRun struct {
	scheduledRun
	kv      jetstream.KeyValue
	keys    []string
	payload []byte
	rate    float64
	lastPut atomic.Int64 // the key whose put was acknowledged last; -1: none yet
}

func (d *driver) loadKV(args loadRequest) (any, error) {
	if args.Sub == "" || args.Bucket == "" || len(args.Keys) == 0 || args.MaxInflight < 1 || args.Rate < 0 || args.PayloadSize < 0 {
		return nil, failure("invalid", "load_kv needs sub, bucket, keys, max_inflight >= 1, rate >= 0, payload_size >= 0")
	}
	return d.inSession(args.Session, kvOpTimeout, func(ctx context.Context, s *session) (any, error) {
		kv, err := s.js.KeyValue(ctx, args.Bucket)
		if err != nil {
			return nil, err
		}
		run := &kvRun{
			scheduledRun: newScheduledRun(d, args), kv: kv, keys: args.Keys,
			payload: []byte(strings.Repeat("x", args.PayloadSize)), rate: args.Rate,
		}
		run.lastPut.Store(-1)
		return run.start(run, args.BatchMs, run.schedule)
	})
}

// schedule runs operation i at its intended time (open loop, at most max_inflight outstanding, the rest logged as
// Overflow puts) or one after the other (closed loop), as nats-py's KvUser.
func (r *kvRun) schedule(started int64) {
	defer close(r.done)
	defer r.inflight.Wait()
	if r.rate <= 0 {
		for index := int64(0); ; index++ {
			now := wallNs()
			if now >= r.stopAt.Load() {
				return
			}
			r.one(index, now)
		}
	}
	openLoop(r.rate, started, r.stopAt, r.stopping, func(index, intended, now int64) {
		if !r.inWindow(func() { r.one(index, intended) }) {
			r.record(kvOpPut, index/2%int64(len(r.keys)), intended, now, now, 0, overflowClass, 0)
		}
	})
}

// one runs operation `index`: even ones put key index/2, odd ones get the key whose put was acknowledged last.
func (r *kvRun) one(index, intended int64) {
	op, key := int64(kvOpPut), index/2%int64(len(r.keys))
	if last := r.lastPut.Load(); index%2 == 1 && last >= 0 {
		op, key = kvOpGet, last
	}
	ctx, cancel := context.WithTimeout(context.Background(), kvOpTimeout)
	defer cancel()
	sent := wallNs()
	var revision uint64
	var err error
	if op == kvOpPut {
		revision, err = r.kv.Put(ctx, r.keys[key], r.payload)
		if err == nil {
			r.lastPut.Store(key)
		}
	} else {
		var entry jetstream.KeyValueEntry
		if entry, err = r.kv.Get(ctx, r.keys[key]); err == nil {
			revision = entry.Revision()
		}
	}
	class, code := "", int64(0)
	if err != nil {
		class, code = loadErrorClass(err)
	}
	r.record(op, key, intended, sent, wallNs(), int64(revision), class, code)
}

func (r *kvRun) record(op, key, intended, sent, done, revision int64, class string, code int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count(class)
	r.rows = append(r.rows, op, key, intended, sent, done, revision, r.errorNo(class), code)
}

// finish ends the schedule at `at`; the operations in flight end within their own timeout and are logged.
func (r *kvRun) finish(at int64) map[string]any {
	r.stop(at)
	<-r.done
	return r.last(r.flushed, func() map[string]any { return r.answer("ok") })
}

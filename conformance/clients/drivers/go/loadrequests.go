// Load: counter increments (ADR-49) and atomic batches (ADR-50) for `jetcheck load --client nats.go`, the
// `counter` and `batch-publish` scenarios. See ../PROTOCOL.md, "Load".
//
// nats.go (through v1.55.0) has no API of its own for either: an increment is a JetStream publish with the header
// Nats-Incr (jetstream.PublishMsg, waiting for the ack that carries the new total), and a batch is core messages
// with the Nats-Batch-* headers, the first and the commit sent with Conn.RequestMsgWithContext (the first is
// answered empty, or with why it is refused; the commit with the batch's PubAck), the others with Conn.PublishMsg.
// Each operation waits for its answer; rows are load_publish's.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const loadRequestTimeout = 10 * time.Second // one increment, or one batch from its first message to its commit ack

// requestRun runs one waiting operation per intended time (open loop, at most max_inflight outstanding, the rest
// logged as Overflow) or one after the other (closed loop), as nats-py's CounterPublisher and BatchPublisher.
type requestRun struct {
	scheduledRun
	rate float64
	send func(ctx context.Context) (int64, error) // one operation: its stream sequence, or why it failed
}

// scheduledRun is what the request and KV runs keep alike: their rows and counts, their schedule's stop, the
// operations in flight (open loop), and whether the schedule and the flusher have ended.
type scheduledRun struct {
	rowLog
	opCounts
	schedStop
	window   chan struct{} // one token per operation in flight
	inflight sync.WaitGroup
	done     chan struct{} // the schedule has ended and every operation is logged
	flushed  chan struct{}
}

// inWindow runs op in a goroutine of its own when fewer than max_inflight operations are in flight, and says
// whether it did (false: the window is full, and the caller logs the operation as an overflow).
func (r *scheduledRun) inWindow(op func()) bool {
	select {
	case r.window <- struct{}{}:
		r.inflight.Add(1)
		go func() {
			defer r.inflight.Done()
			op()
			<-r.window
		}()
		return true
	default:
		return false
	}
}

func newScheduledRun(d *driver, args loadRequest) scheduledRun {
	return scheduledRun{
		rowLog: rowLog{d: d, sub: args.Sub, errIndex: map[string]int64{}}, schedStop: newSchedStop(),
		window: make(chan struct{}, args.MaxInflight), done: make(chan struct{}), flushed: make(chan struct{}),
	}
}

// start registers `run` (whose scheduledRun this is) under its sub, then starts the flusher and `schedule`;
// returns the load op's answer.
func (r *scheduledRun) start(run loadRunner, batchMs float64, schedule func(started int64)) (any, error) {
	if err := register(r.sub, run); err != nil {
		return nil, err
	}
	started := wallNs()
	go r.flushEvery(batchEvery(batchMs), r.done, r.flushed)
	go schedule(started)
	return map[string]any{"started_ns": started}, nil
}

// BatchCountMismatch: the commit's ack counted another number of messages than the batch had.
type BatchCountMismatch struct{ Sent, Acked int }

func (e *BatchCountMismatch) Error() string {
	return fmt.Sprintf("batch of %d messages committed with count %d", e.Sent, e.Acked)
}

// batchAnswer is the server's answer to a batch's first message (empty when accepted) or to its commit.
type batchAnswer struct {
	Error  *jetstream.APIError `json:"error"`
	Stream string              `json:"stream"`
	Seq    uint64              `json:"seq"`
	Count  int                 `json:"count"`
}

func (d *driver) loadCounter(args loadRequest) (any, error) {
	s, err := d.requestSession("load_counter", args)
	if err != nil {
		return nil, err
	}
	subject := args.Subject
	increment := func(ctx context.Context) (int64, error) {
		msg := &nats.Msg{Subject: subject, Header: nats.Header{"Nats-Incr": []string{"+1"}}}
		ack, err := s.js.PublishMsg(ctx, msg)
		if err != nil {
			return 0, err
		}
		return int64(ack.Sequence), nil
	}
	return d.startRequestRun(args, increment)
}

func (d *driver) loadBatch(args loadRequest) (any, error) {
	if args.BatchSize < 2 {
		return nil, failure("invalid", "load_batch needs batch_size >= 2")
	}
	s, err := d.requestSession("load_batch", args)
	if err != nil {
		return nil, err
	}
	payload := make([]byte, args.PayloadSize)
	for i := range payload {
		payload[i] = 'x'
	}
	var batches atomic.Int64
	batch := func(ctx context.Context) (int64, error) {
		id := args.Sub + "-" + strconv.FormatInt(batches.Add(1), 10) // unique in the run's stream
		for n := 1; n <= args.BatchSize; n++ {
			msg := &nats.Msg{Subject: args.Subject, Data: payload, Header: nats.Header{
				"Nats-Batch-Id": []string{id}, "Nats-Batch-Sequence": []string{strconv.Itoa(n)},
			}}
			if n > 1 && n < args.BatchSize {
				if err := s.nc.PublishMsg(msg); err != nil {
					return 0, err
				}
				continue
			}
			if n == args.BatchSize {
				msg.Header["Nats-Batch-Commit"] = []string{"1"}
			}
			reply, err := s.nc.RequestMsgWithContext(ctx, msg)
			if err != nil {
				return 0, err
			}
			var answer batchAnswer
			if len(reply.Data) > 0 {
				if err := json.Unmarshal(reply.Data, &answer); err != nil {
					return 0, jetstream.ErrInvalidJSAck
				}
			}
			if answer.Error != nil {
				return 0, answer.Error
			}
			if n == args.BatchSize {
				if answer.Stream == "" {
					return 0, jetstream.ErrInvalidJSAck
				}
				if answer.Count != args.BatchSize {
					return 0, &BatchCountMismatch{Sent: args.BatchSize, Acked: answer.Count}
				}
				return int64(answer.Seq), nil
			}
		}
		return 0, nil // not reached: the loop ends with the commit
	}
	return d.startRequestRun(args, batch)
}

func (d *driver) requestSession(op string, args loadRequest) (*session, error) {
	if args.Sub == "" || args.Subject == "" || args.MaxInflight < 1 || args.Rate < 0 || args.PayloadSize < 0 {
		return nil, failure("invalid", "%s needs sub, subject, max_inflight >= 1, rate >= 0, payload_size >= 0", op)
	}
	return d.session(args.Session)
}

func (d *driver) startRequestRun(args loadRequest, send func(context.Context) (int64, error)) (any, error) {
	run := &requestRun{scheduledRun: newScheduledRun(d, args), rate: args.Rate, send: send}
	return run.start(run, args.BatchMs, run.schedule)
}

func (r *requestRun) schedule(started int64) {
	defer close(r.done)
	defer r.inflight.Wait()
	if r.rate <= 0 {
		for {
			now := wallNs()
			if now >= r.stopAt.Load() {
				return
			}
			r.one(now)
		}
	}
	openLoop(r.rate, started, r.stopAt, r.stopping, func(_, intended, now int64) {
		if !r.inWindow(func() { r.one(intended) }) {
			r.record(intended, now, now, 0, overflowClass, 0)
		}
	})
}

func (r *requestRun) one(intended int64) {
	ctx, cancel := context.WithTimeout(context.Background(), loadRequestTimeout)
	defer cancel()
	sent := wallNs()
	seq, err := r.send(ctx)
	class, code := "", int64(0)
	if err != nil {
		class, code = loadErrorClass(err)
	}
	r.record(intended, sent, wallNs(), seq, class, code)
}

func (r *requestRun) record(intended, sent, acked, seq int64, class string, code int64) {
	r.recordRow(&r.opCounts, intended, sent, acked, seq, class, code)
}

// finish ends the schedule at `at`; the operations in flight end within loadRequestTimeout and are logged.
func (r *requestRun) finish(at int64) map[string]any {
	r.stop(at)
	<-r.done
	return r.last(r.flushed, func() map[string]any { return r.answer("acked") })
}

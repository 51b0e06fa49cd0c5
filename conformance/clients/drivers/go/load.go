// Load: an open- or closed-loop publisher for `jetcheck load --client nats.go`. See ../PROTOCOL.md, "Load".
//
// The schedule, the async publishes and the ack collection all run here; jetcheck only starts and stops a run and
// receives every operation's times in batches (one record per batch_ms), so neither the pipe nor Python paces it.

package main

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func init() {
	handles(loading((*driver).loadPublish), "load_publish")
	handles(loading((*driver).loadConsume), "load_consume")
	handles(loading((*driver).loadCounter), "load_counter")
	handles(loading((*driver).loadBatch), "load_batch")
	handles(loading(func(_ *driver, args loadRequest) (any, error) { return loadStop(args) }), "load_stop")
}

const (
	loadRowSlots     = 6 // intended_ns, sent_ns, acked_ns, stream_seq, error (0: ok, else 1 + index in errors), err_code
	loadDefaultBatch = 50 * time.Millisecond
	loadDrainTimeout = 10 * time.Second
	loadNever        = int64(1) << 62
	stampTs          = "Jc-Ts"
	stampSeq         = "Jc-Seq"
	overflowClass    = "Overflow"
	unackedClass     = "Unacknowledged"
)

type loadRequest struct {
	Session     string   `json:"session"`
	Sub         string   `json:"sub"`
	Subject     string   `json:"subject"`
	PayloadSize int      `json:"payload_size"`
	Rate        float64  `json:"rate"`
	MaxInflight int      `json:"max_inflight"`
	BatchMs     float64  `json:"batch_ms"`
	Stamp       bool     `json:"stamp"`
	AtNs        *int64   `json:"at_ns"`
	Stream      string   `json:"stream"`
	Durable     string   `json:"durable"`
	Batch       int      `json:"batch"`
	Bucket      string   `json:"bucket"`
	Keys        []string `json:"keys"`
	BatchSize   int      `json:"batch_size"`
}

// wallNs is the op log's clock: wall-clock ns, the same clock as Python's time.time_ns() on this machine.
func wallNs() int64 { return time.Now().UnixNano() }

type pendingPublish struct {
	intended, sent int64
	future         jetstream.PubAckFuture
}

type loadRun struct {
	rowLog
	js      jetstream.JetStream
	req     loadRequest
	payload []byte

	schedStop
	drained chan struct{} // closed loadDrainTimeout after the stop: outstanding acks are given up
	window  chan struct{} // one token per publish in flight (max_inflight)
	acks    chan pendingPublish
	done    chan struct{} // the collector has logged every publish
	flushed chan struct{} // the periodic flusher has ended: load_stop's flush is the last record
	seq     int64
	opCounts
}

// opCounts are a run's operations: done, never sent (Overflow) and failed; guarded by its rowLog's mu.
type opCounts struct {
	ops, done, overflow, failed int64
}

// count counts an operation that ended as `class` ("" done, overflowClass never sent, anything else failed).
func (c *opCounts) count(class string) {
	c.ops++
	switch class {
	case "":
		c.done++
	case overflowClass:
		c.overflow++
	default:
		c.failed++
	}
}

// answer is load_stop's answer: the counts, the done ones under `doneName`.
func (c *opCounts) answer(doneName string) map[string]any {
	return map[string]any{"ops": c.ops, doneName: c.done, "overflow": c.overflow, "failed": c.failed}
}

// recordRow logs one publish-shaped operation (intended, sent, acked, seq, error, code) and counts it.
func (l *rowLog) recordRow(c *opCounts, intended, sent, acked, seq int64, class string, code int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.count(class)
	l.rows = append(l.rows, intended, sent, acked, seq, l.errorNo(class), code)
}

// loadRunner is a publish or consume run: load_stop stops it, waits for its last rows and answers its counts.
type loadRunner interface {
	finish(at int64) map[string]any
}

var (
	loadRunsMu sync.Mutex
	loadRuns   = map[string]loadRunner{}
)

// register makes `run` the load sub `sub`, refused when that sub runs already.
func register(sub string, run loadRunner) error {
	loadRunsMu.Lock()
	defer loadRunsMu.Unlock()
	if loadRuns[sub] != nil {
		return failure("invalid", "load sub %q exists", sub)
	}
	loadRuns[sub] = run
	return nil
}

// rowLog holds a run's rows (int64s, a fixed number per operation) and error classes until the next flush.
type rowLog struct {
	d        *driver
	sub      string
	mu       sync.Mutex // guards rows, errors, errIndex and the run's counts
	rows     []int64
	errors   []string
	errIndex map[string]int64
	extra    func() map[string]any // more fields of every record (called with mu held)
}

// errorNo is the 1-based index of `class` among the run's error classes (0 for ""); call it with mu held.
func (l *rowLog) errorNo(class string) int64 {
	if class == "" {
		return 0
	}
	index, ok := l.errIndex[class]
	if !ok {
		l.errors = append(l.errors, class)
		index = int64(len(l.errors))
		l.errIndex[class] = index
	}
	return index
}

func batchEvery(ms float64) time.Duration {
	if ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	return loadDefaultBatch
}

// loading reads a load op's request for `run`.
func loading(run func(*driver, loadRequest) (any, error)) opHandler {
	return func(d *driver, req *request) (any, error) {
		var args loadRequest
		if err := json.Unmarshal(req.Raw, &args); err != nil {
			return nil, failure("invalid", "%s: %v", req.Op, err)
		}
		return run(d, args)
	}
}

func (d *driver) loadPublish(args loadRequest) (any, error) {
	if args.Sub == "" || args.Subject == "" || args.MaxInflight < 1 || args.Rate < 0 || args.PayloadSize < 0 {
		return nil, failure("invalid", "load_publish needs sub, subject, max_inflight >= 1, rate >= 0, payload_size >= 0")
	}
	s, err := d.session(args.Session)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(s.nc, jetstream.WithPublishAsyncMaxPending(args.MaxInflight))
	if err != nil {
		return nil, err
	}
	run := &loadRun{
		rowLog: rowLog{d: d, sub: args.Sub, errIndex: map[string]int64{}}, js: js, req: args, payload: make([]byte, args.PayloadSize),
		schedStop: newSchedStop(), drained: make(chan struct{}),
		window: make(chan struct{}, args.MaxInflight), acks: make(chan pendingPublish, args.MaxInflight+1),
		done: make(chan struct{}), flushed: make(chan struct{}),
	}
	for i := range run.payload {
		run.payload[i] = 'x'
	}
	if err := register(args.Sub, run); err != nil {
		return nil, err
	}
	started := wallNs()
	go run.collect()
	go run.flushEvery(batchEvery(args.BatchMs), run.done, run.flushed)
	go run.schedule(started)
	return map[string]any{"started_ns": started}, nil
}

func loadStop(args loadRequest) (any, error) {
	loadRunsMu.Lock()
	run := loadRuns[args.Sub]
	delete(loadRuns, args.Sub)
	loadRunsMu.Unlock()
	if run == nil {
		return nil, failure("invalid", "no load sub %q", args.Sub)
	}
	at := wallNs()
	if args.AtNs != nil && *args.AtNs < at {
		at = *args.AtNs
	}
	return run.finish(at), nil
}

func (run *loadRun) finish(at int64) map[string]any {
	run.stop(at)
	select {
	case <-run.done:
	case <-time.After(loadDrainTimeout):
		close(run.drained) // the collector logs what is still outstanding as unacknowledged
		<-run.done
	}
	return run.last(run.flushed, func() map[string]any { return run.answer("acked") })
}

// schedStop ends a schedule: nothing intended at or after stopAt is started, and stopping wakes it.
type schedStop struct {
	stopAt   *atomic.Int64
	stopping chan struct{} // closed by load_stop: the schedule wakes and ends
	once     *sync.Once
}

func newSchedStop() schedStop {
	s := schedStop{stopAt: new(atomic.Int64), stopping: make(chan struct{}), once: new(sync.Once)}
	s.stopAt.Store(loadNever)
	return s
}

func (s schedStop) stop(at int64) {
	s.once.Do(func() {
		if at < s.stopAt.Load() {
			s.stopAt.Store(at)
		}
		close(s.stopping)
	})
}

// schedule publishes at fixed intended times (open loop: rate > 0) or as fast as the window lets it (closed loop).
func (r *loadRun) schedule(started int64) {
	defer close(r.acks)
	if r.req.Rate <= 0 {
		for {
			select {
			case r.window <- struct{}{}:
			case <-r.stopping:
				return
			}
			now := wallNs()
			if now >= r.stopAt.Load() {
				<-r.window
				return
			}
			r.publish(now)
		}
	}
	openLoop(r.req.Rate, started, r.stopAt, r.stopping, func(_, intended, now int64) {
		select {
		case r.window <- struct{}{}:
			r.publish(intended)
		default: // max_inflight outstanding: this one is not sent, and says so
			r.record(intended, now, now, 0, overflowClass, 0)
		}
	})
}

// openLoop calls due(index, intended, now) for operation index of a `rate`/s schedule from `started` as soon as
// it falls due, never waiting for earlier ones, and returns at the first one intended at or after stopAt.
func openLoop(rate float64, started int64, stopAt *atomic.Int64, stopping <-chan struct{}, due func(index, intended, now int64)) {
	interval := 1e9 / rate
	timer := time.NewTimer(0)
	defer timer.Stop()
	for index := int64(0); ; {
		now := wallNs()
		for {
			intended := started + int64(float64(index)*interval)
			if intended > now {
				break
			}
			if intended >= stopAt.Load() {
				return
			}
			due(index, intended, now)
			index++
		}
		next := started + int64(float64(index)*interval)
		if next >= stopAt.Load() {
			return
		}
		timer.Reset(time.Duration(next - wallNs()))
		select {
		case <-timer.C:
		case <-stopping:
			// stop_at is set: what fell due before it is still sent (and logged), nothing after it
			if !timer.Stop() {
				<-timer.C
			}
		}
	}
}

func (r *loadRun) publish(intended int64) {
	msg := &nats.Msg{Subject: r.req.Subject, Data: r.payload}
	sent := wallNs()
	if r.req.Stamp {
		r.seq++
		msg.Header = nats.Header{stampTs: []string{strconv.FormatInt(sent, 10)}, stampSeq: []string{strconv.FormatInt(r.seq, 10)}}
	}
	future, err := publishMsgAsync(r.js, msg)
	if err != nil {
		<-r.window
		class, code := loadErrorClass(err)
		r.record(intended, sent, wallNs(), 0, class, code)
		return
	}
	r.acks <- pendingPublish{intended: intended, sent: sent, future: future}
}

// publishMsgAsync is the client's PublishMsgAsync, which took a context first before nats.go v1.28.0.
func publishMsgAsync(js jetstream.JetStream, msg *nats.Msg) (jetstream.PubAckFuture, error) {
	switch p := any(js).(type) { // any: the two shapes cannot both be JetStream's
	case interface {
		PublishMsgAsync(*nats.Msg, ...jetstream.PublishOpt) (jetstream.PubAckFuture, error)
	}:
		return p.PublishMsgAsync(msg)
	case interface {
		PublishMsgAsync(context.Context, *nats.Msg, ...jetstream.PublishOpt) (jetstream.PubAckFuture, error)
	}:
		return p.PublishMsgAsync(context.Background(), msg)
	}
	return nil, failure("other", "%T has no PublishMsgAsync of a known shape", js)
}

// collect waits for each publish's ack in publish order (a stream acks in that order), logs it and frees its slot.
func (r *loadRun) collect() {
	defer close(r.done)
	for p := range r.acks {
		select {
		case ack := <-p.future.Ok():
			r.record(p.intended, p.sent, wallNs(), int64(ack.Sequence), "", 0)
		case err := <-p.future.Err():
			class, code := loadErrorClass(err)
			r.record(p.intended, p.sent, wallNs(), 0, class, code)
		case <-r.drained:
			r.record(p.intended, p.sent, wallNs(), 0, unackedClass, 0)
		}
		<-r.window
	}
}

func loadErrorClass(err error) (string, int64) {
	var jsErr jetstream.JetStreamError
	if errors.As(err, &jsErr) && jsErr.APIError() != nil && jsErr.APIError().Code != 0 {
		return "jetstream.APIError", int64(jsErr.APIError().ErrorCode)
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.name, 0
		}
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", err), "*"), 0
}

func (r *loadRun) record(intended, sent, acked, seq int64, class string, code int64) {
	r.recordRow(&r.opCounts, intended, sent, acked, seq, class, code)
}

// flushEvery flushes once per `every` until `done` is closed, then closes `flushed`.
func (l *rowLog) flushEvery(every time.Duration, done <-chan struct{}, flushed chan<- struct{}) {
	defer close(flushed)
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
			l.flush()
		case <-done:
			return // load_stop sends the rest before it answers
		}
	}
}

// last waits for the periodic flusher to end (`flushed`), streams the last record and returns the run's counts
// (read with mu held): load_stop's answer, which every row precedes.
func (l *rowLog) last(flushed <-chan struct{}, counts func() map[string]any) map[string]any {
	<-flushed
	l.flush()
	l.mu.Lock()
	defer l.mu.Unlock()
	return counts()
}

// flush streams the rows logged since the last flush as one record.
func (l *rowLog) flush() {
	l.mu.Lock()
	rows, names := l.rows, l.errors
	l.rows = make([]int64, 0, cap(rows))
	record := map[string]any{"type": "load", "sub": l.sub, "errors": names}
	if l.extra != nil {
		for k, v := range l.extra() {
			record[k] = v
		}
	}
	l.mu.Unlock()
	if len(rows) == 0 {
		return
	}
	raw := make([]byte, 8*len(rows))
	for i, v := range rows {
		binary.LittleEndian.PutUint64(raw[8*i:], uint64(v))
	}
	record["rows_b64"] = base64.StdEncoding.EncodeToString(raw)
	l.d.write(record)
}

// --- consume: fetch + explicit ack on a durable pull consumer -----------------------------------------------------

const (
	consumeRowSlots  = 10 // op, started_ns, ended_ns, stream_seq, delivered, e2e_ns, subject, size, error, err_code
	consumeOpMessage = 0  // one consumed (and acked) message
	consumeOpFetch   = 1  // one fetch that returned messages or failed
	consumeMaxWait   = 500 * time.Millisecond
	noE2E            = -1
)

type consumeRun struct {
	rowLog
	nc       *nats.Conn
	consumer jetstream.Consumer
	batch    int

	stopAt   atomic.Int64
	done     chan struct{} // the fetch loop has ended and the acks are flushed
	flushed  chan struct{}
	subjects []string // the subjects consumed so far: a row names one by its 1-based index
	subIndex map[string]int64
	messages int64
	fetches  int64
	failed   int64
}

func (d *driver) loadConsume(args loadRequest) (any, error) {
	if args.Sub == "" || args.Stream == "" || args.Durable == "" || args.Batch < 1 {
		return nil, failure("invalid", "load_consume needs sub, stream, durable, batch >= 1")
	}
	return d.inSession(args.Session, apiTimeout, func(ctx context.Context, s *session) (any, error) {
		consumer, err := s.js.Consumer(ctx, args.Stream, args.Durable)
		if err != nil {
			return nil, err
		}
		run := &consumeRun{
			rowLog: rowLog{d: d, sub: args.Sub, errIndex: map[string]int64{}}, nc: s.nc, consumer: consumer,
			batch: args.Batch, done: make(chan struct{}), flushed: make(chan struct{}), subIndex: map[string]int64{},
		}
		run.extra = func() map[string]any { return map[string]any{"subjects": run.subjects} }
		run.stopAt.Store(loadNever)
		if err := register(args.Sub, run); err != nil {
			return nil, err
		}
		started := wallNs()
		go run.flushEvery(batchEvery(args.BatchMs), run.done, run.flushed)
		go run.fetchLoop()
		return map[string]any{"started_ns": started}, nil
	})
}

// fetchLoop fetches up to `batch` messages at a time until the stop, logging and acking each message.
func (r *consumeRun) fetchLoop() {
	defer close(r.done)
	defer r.nc.Flush() // acks are fire-and-forget publishes: out before load_stop answers
	for {
		started := wallNs()
		if started >= r.stopAt.Load() {
			return
		}
		batch, err := r.consumer.Fetch(r.batch, jetstream.FetchMaxWait(consumeMaxWait))
		if err != nil {
			r.recordFetch(started, 0, err)
			continue
		}
		count := 0
		for msg := range batch.Messages() {
			count++
			r.consumed(msg, started, wallNs())
		}
		if count > 0 || (batch.Error() != nil && !errors.Is(batch.Error(), nats.ErrTimeout)) {
			r.recordFetch(started, count, batch.Error()) // an empty fetch that timed out is not an operation
		}
	}
}

func (r *consumeRun) consumed(msg jetstream.Msg, started, received int64) {
	e2e := int64(noE2E)
	if stamp := msg.Headers().Get(stampTs); stamp != "" {
		if sent, err := strconv.ParseInt(stamp, 10, 64); err == nil {
			e2e = received - sent
		}
	}
	var seq, delivered int64
	if meta, err := msg.Metadata(); err == nil {
		seq, delivered = int64(meta.Sequence.Stream), int64(meta.NumDelivered)
	}
	class, code := "", int64(0)
	if err := msg.Ack(); err != nil {
		class, code = loadErrorClass(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	subject, ok := r.subIndex[msg.Subject()]
	if !ok {
		r.subjects = append(r.subjects, msg.Subject())
		subject = int64(len(r.subjects))
		r.subIndex[msg.Subject()] = subject
	}
	r.messages++
	if class != "" {
		r.failed++
	}
	r.rows = append(r.rows, consumeOpMessage, started, received, seq, delivered, e2e, subject,
		int64(len(msg.Data())), r.errorNo(class), code)
}

func (r *consumeRun) recordFetch(started int64, count int, err error) {
	class, code := "", int64(0)
	if err != nil {
		class, code = loadErrorClass(err)
	}
	ended := wallNs()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fetches++
	if class != "" {
		r.failed++
	}
	r.rows = append(r.rows, consumeOpFetch, started, ended, 0, 0, noE2E, 0, int64(count), r.errorNo(class), code)
}

// finish lets the fetch in progress end (it still logs and acks what it got), flushes the acks and the last rows.
func (r *consumeRun) finish(at int64) map[string]any {
	if at < r.stopAt.Load() {
		r.stopAt.Store(at)
	}
	<-r.done
	return r.last(r.flushed, func() map[string]any {
		return map[string]any{"ops": r.messages, "fetches": r.fetches, "failed": r.failed}
	})
}

// The jetcheck driver for nats.go's jetstream package: protocol v3 (conformance/clients/drivers/PROTOCOL.md).
//
// One JSON object per line in on stdin (requests), out on stdout (responses, deliveries, events). Every request
// runs in its own goroutine; one writer goroutine owns stdout so lines never interleave. stderr is a log that
// never carries credentials.
package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	protocolVersion = 3
	clientModule    = "github.com/nats-io/nats.go"
	apiTimeout      = 10 * time.Second
	chattyInterval  = 100 * time.Millisecond
)

// start carries Go's monotonic clock reading: time.Since(start) never jumps with the wall clock.
var start = time.Now()

func monoNs() int64 { return time.Since(start).Nanoseconds() }

// ---------------------------------------------------------------------------------------------------------------
// Output

type driver struct {
	out       chan []byte
	outMu     sync.RWMutex // guards outClosed: client callbacks may still fire while the driver exits
	outClosed bool
	wg        sync.WaitGroup // requests in flight

	mu       sync.Mutex
	sessions map[string]*session
	subs     map[string]*subscription
	modes    map[string]bool
	chatty   bool // the chatty ticker runs
}

func newDriver() *driver {
	return &driver{
		out:      make(chan []byte, 1024),
		sessions: map[string]*session{},
		subs:     map[string]*subscription{},
		modes:    map[string]bool{},
	}
}

func (d *driver) write(record any) {
	line, err := json.Marshal(record)
	if err != nil {
		log.Printf("cannot encode a record: %v", err)
		return
	}
	d.outMu.RLock()
	defer d.outMu.RUnlock()
	if !d.outClosed {
		d.out <- line
	}
}

// closeOutput ends the output: records written afterwards are dropped, the writer flushes and finishes.
func (d *driver) closeOutput() {
	d.outMu.Lock()
	defer d.outMu.Unlock()
	if !d.outClosed {
		d.outClosed = true
		close(d.out)
	}
}

func (d *driver) writer(done chan<- struct{}) {
	w := bufio.NewWriter(os.Stdout)
	for line := range d.out {
		w.Write(line)
		w.WriteByte('\n')
		if len(d.out) == 0 {
			w.Flush()
		}
	}
	w.Flush()
	close(done)
}

type apiFailure struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	Code    *int   `json:"code"`
	ErrCode *int   `json:"err_code"`
}

func (f *apiFailure) Error() string { return f.Kind + ": " + f.Message }

func failure(kind, format string, args ...any) *apiFailure {
	return &apiFailure{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// classify maps a client error onto the protocol's error kinds, keeping the client's own message.
func classify(err error) *apiFailure {
	var already *apiFailure
	if errors.As(err, &already) {
		return already
	}
	message := describe(err)
	var jsErr jetstream.JetStreamError
	if errors.As(err, &jsErr) && jsErr.APIError() != nil && jsErr.APIError().Code != 0 {
		api := jsErr.APIError()
		code, errCode := api.Code, int(api.ErrorCode)
		return &apiFailure{Kind: "api", Message: message, Code: &code, ErrCode: &errCode}
	}
	switch {
	case errors.Is(err, jetstream.ErrInvalidOption), errors.Is(err, nats.ErrInvalidArg),
		errors.Is(err, jetstream.ErrInvalidStreamName), errors.Is(err, jetstream.ErrInvalidConsumerName):
		return &apiFailure{Kind: "invalid", Message: message}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return &apiFailure{Kind: "timeout", Message: message}
	case errors.Is(err, nats.ErrNoServers), errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired),
		errors.Is(err, nats.ErrConnectionDraining), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, os.ErrNotExist), isAny(err, connectionErrors):
		return &apiFailure{Kind: "connection", Message: message}
	}
	return &apiFailure{Kind: "other", Message: message}
}

// connectionErrors are the client's errors for a lost connection beside nats.go's own (later releases add some:
// errors_*.go).
var connectionErrors []error

func isAny(err error, targets []error) bool {
	for _, target := range targets {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// namedError is one of the client's sentinel errors and its name in Go, for details.
type namedError struct {
	name string
	err  error
}

// The client's sentinel errors by name, so a detail reads "jetstream.ErrNoHeartbeat: nats: no heartbeat received".
var sentinels = []namedError{
	{"jetstream.ErrNoHeartbeat", jetstream.ErrNoHeartbeat},
	{"jetstream.ErrConsumerDeleted", jetstream.ErrConsumerDeleted},
	{"jetstream.ErrConsumerNotFound", jetstream.ErrConsumerNotFound},
	{"jetstream.ErrConsumerLeadershipChanged", jetstream.ErrConsumerLeadershipChanged},
	{"jetstream.ErrOrderedConsumerReset", jetstream.ErrOrderedConsumerReset},
	{"jetstream.ErrBadRequest", jetstream.ErrBadRequest},
	{"jetstream.ErrMsgIteratorClosed", jetstream.ErrMsgIteratorClosed},
	{"jetstream.ErrNoMessages", jetstream.ErrNoMessages},
	{"jetstream.ErrMaxBytesExceeded", jetstream.ErrMaxBytesExceeded},
	{"jetstream.ErrStreamNotFound", jetstream.ErrStreamNotFound},
	{"jetstream.ErrInvalidOption", jetstream.ErrInvalidOption},
	{"nats.ErrNoResponders", nats.ErrNoResponders},
	{"nats.ErrTimeout", nats.ErrTimeout},
	{"nats.ErrConnectionClosed", nats.ErrConnectionClosed},
	{"nats.ErrSlowConsumer", nats.ErrSlowConsumer},
	{"context.DeadlineExceeded", context.DeadlineExceeded},
}

// describe names err by the first of `first`, then of sentinels, that it is (its Go type otherwise).
func describe(err error, first ...namedError) string {
	for _, named := range [][]namedError{first, sentinels} {
		for _, s := range named {
			if errors.Is(err, s.err) {
				return s.name + ": " + err.Error()
			}
		}
	}
	return fmt.Sprintf("%T: %v", err, err)
}

// ---------------------------------------------------------------------------------------------------------------
// Requests

type startPolicy struct {
	DeliverPolicy string  `json:"deliver_policy"`
	Seq           *uint64 `json:"seq"`
	Time          *string `json:"time"`
}

type request struct {
	ID                 *int64             `json:"id"`
	Op                 string             `json:"op"`
	Session            string             `json:"session"`
	Sub                string             `json:"sub"`
	URL                string             `json:"url"`
	Credentials        map[string]*string `json:"credentials"`
	ReconnectWaitS     *float64           `json:"reconnect_wait_s"`
	Stream             string             `json:"stream"`
	Subject            string             `json:"subject"`
	Consumer           string             `json:"consumer"`
	IdleHeartbeatS     *float64           `json:"idle_heartbeat_s"`
	ExpiresS           *float64           `json:"expires_s"`
	MaxMessages        *int               `json:"max_messages"`
	Batch              *int               `json:"batch"`
	Start              *startPolicy       `json:"start"`
	InactiveThresholdS *float64           `json:"inactive_threshold_s"`
	Modes              []string           `json:"modes"`
	Durable            string             `json:"durable"`
	Queue              string             `json:"queue"`
	APIPrefix          string             `json:"api_prefix"`
	InboxPrefix        string             `json:"inbox_prefix"`
	Raw                []byte             `json:"-"`   // the whole request, for the ops of later protocol sections
	Obj                json.RawMessage    `json:"obj"` // object store ops' arguments (objectstore.go)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func (d *driver) respond(id int64, result any, err error) {
	if err != nil {
		d.write(map[string]any{"id": id, "ok": false, "error": classify(err)})
		return
	}
	if result == nil {
		result = map[string]any{}
	}
	d.write(map[string]any{"id": id, "ok": true, "result": result})
}

func init() {
	handles(func(d *driver, _ *request) (any, error) { return d.hello(), nil }, "hello")
	handles((*driver).connect, "connect")
	handles(func(d *driver, req *request) (any, error) { return d.closeSession(req.Session) }, "close")
	handles(func(d *driver, req *request) (any, error) { return d.ping(req.Session) }, "ping")
	handles((*driver).ordered, "ordered")
	handles((*driver).consume, "consume")
	handles((*driver).fetch, "fetch")
	handles(func(d *driver, req *request) (any, error) { return d.stop(req.Sub) }, "stop")
	handles(func(d *driver, req *request) (any, error) { return d.misbehave(req.Modes) }, "misbehave")
}

func (d *driver) handle(req *request) (any, error) {
	if handler, ok := opHandlers[req.Op]; ok {
		return handler(d, req)
	}
	return nil, failure("unsupported", "op %q is not implemented by the nats.go driver (protocol v%d)", req.Op, protocolVersion)
}

func clientVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, dep := range info.Deps {
		if dep.Path == clientModule {
			if dep.Replace != nil {
				return dep.Replace.Version
			}
			return dep.Version
		}
	}
	return "unknown"
}

func (d *driver) hello() map[string]any {
	return map[string]any{
		"protocol":  protocolVersion,
		"client":    "nats.go",
		"version":   clientVersion(),
		"runtime":   runtime.Version(),
		"mono_ns":   monoNs(),
		"ops":       implementedOps(),
		"libraries": libraries(),
		// what this build left out because the nats.go release lacks it (release.go), by feature
		"not_in_release": notInReleaseFeatures(),
	}
}

// libraries are the exact versions of the client's modules built in (nats.go and what it brings).
func libraries() map[string]string {
	found := map[string]string{}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if strings.HasPrefix(dep.Path, "github.com/nats-io/") {
				found[dep.Path] = dep.Version
			}
		}
	}
	return found
}

// ---------------------------------------------------------------------------------------------------------------
// Sessions

type session struct {
	id string
	nc *nats.Conn
	js jetstream.JetStream
}

func credential(creds map[string]*string, key string) string {
	if v, ok := creds[key]; ok && v != nil {
		return *v
	}
	return ""
}

func (d *driver) connect(req *request) (any, error) {
	if req.Session == "" || req.URL == "" {
		return nil, failure("invalid", "connect needs session and url")
	}
	wait := 100 * time.Millisecond
	if req.ReconnectWaitS != nil {
		wait = seconds(*req.ReconnectWaitS)
	}
	id := req.Session
	opts := []nats.Option{
		nats.Name("jetcheck-driver-go"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(wait),
		// The protocol asks for reconnect_wait_s between attempts, not reconnect_wait_s plus a random jitter.
		nats.ReconnectJitter(0, 0),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil && strings.HasPrefix(sub.Subject, pullRequestSubject) {
				// The driver's own look at pull requests (watchPullRequests), not the client's report.
				log.Printf("session %s: watching pull requests: %v", id, err)
				return
			}
			d.event(id, "", "error", describe(err))
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { log.Printf("session %s: disconnected: %v", id, err) }),
		nats.ReconnectHandler(func(*nats.Conn) { log.Printf("session %s: reconnected", id) }),
	}
	c := req.Credentials
	if user := credential(c, "user"); user != "" {
		opts = append(opts, nats.UserInfo(user, credential(c, "password")))
	}
	if token := credential(c, "token"); token != "" {
		opts = append(opts, nats.Token(token))
	}
	if seed := credential(c, "nkey_seed"); seed != "" {
		opt, err := nats.NkeyOptionFromSeed(seed)
		if err != nil {
			return nil, failure("invalid", "nkey seed file unusable: %v", err)
		}
		opts = append(opts, opt)
	}
	if creds := credential(c, "creds"); creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	if ca := credential(c, "tls_ca"); ca != "" {
		opts = append(opts, nats.RootCAs(ca))
	}
	if cert, key := credential(c, "tls_cert"), credential(c, "tls_key"); cert != "" || key != "" {
		opts = append(opts, nats.ClientCert(cert, key))
	}
	opts = append(opts, inboxOption(req.InboxPrefix)...)
	nc, err := nats.Connect(req.URL, opts...)
	if err != nil {
		f := classify(err)
		if f.Kind == "other" {
			f.Kind = "connection"
		}
		return nil, f
	}
	js, err := newJetStream(nc, req.APIPrefix)
	if err != nil {
		nc.Close()
		return nil, err
	}
	d.mu.Lock()
	old := d.sessions[id]
	d.sessions[id] = &session{id: id, nc: nc, js: js}
	d.mu.Unlock()
	if old != nil {
		old.nc.Close()
	}
	log.Printf("session %s: connected to %s", id, nc.ConnectedUrlRedacted())
	return nil, nil
}

func (d *driver) session(id string) (*session, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.sessions[id]
	if s == nil {
		return nil, failure("invalid", "no session %q", id)
	}
	return s, nil
}

// inSession calls call with the session named sessionID and a context that bounds the call to timeout.
func (d *driver) inSession(sessionID string, timeout time.Duration, call func(ctx context.Context, s *session) (any, error)) (any, error) {
	s, err := d.session(sessionID)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return call(ctx, s)
}

// ping answers once the session's connection made a round trip to the server: jetcheck asks after a silence, to
// tell a quiet client from one that lost its server.
func (d *driver) ping(id string) (any, error) {
	s, err := d.session(id)
	if err != nil {
		return nil, err
	}
	return nil, s.nc.FlushTimeout(apiTimeout)
}

func (d *driver) closeSession(id string) (any, error) {
	d.mu.Lock()
	s := d.sessions[id]
	delete(d.sessions, id)
	var mine []*subscription
	for subID, sub := range d.subs {
		if sub.session == id {
			mine = append(mine, sub)
			delete(d.subs, subID)
		}
	}
	d.mu.Unlock()
	if s == nil {
		return nil, failure("invalid", "no session %q", id)
	}
	for _, sub := range mine {
		sub.stop()
	}
	s.nc.Close()
	return nil, nil
}

// ---------------------------------------------------------------------------------------------------------------
// Subscriptions: one continuous consumption (ordered, push or pull consume) and its bookkeeping

type subscription struct {
	d       *driver
	id      string
	session string
	ordered bool

	mu       sync.Mutex
	cc       jetstream.ConsumeContext
	stopped  bool   // stop was asked (or the client ended it): nothing more is streamed
	consumer string // the consumer of the last delivery or info seen
	reset    bool   // a reset event was streamed
	done     chan struct{}
	// stopWatch stops a watch sub's client watcher (watch.go); nil for consumptions
	stopWatch func()
}

func (d *driver) newSubscription(sessionID, id string, ordered bool) (*subscription, error) {
	if id == "" {
		return nil, failure("invalid", "a sub id is needed")
	}
	sub := &subscription{d: d, id: id, session: sessionID, ordered: ordered, done: make(chan struct{})}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.subs[id] != nil {
		return nil, failure("invalid", "sub %q exists", id)
	}
	d.subs[id] = sub
	return sub, nil
}

// subscribed registers sub subID of session s, then asks the client for its consumer (`lookup`, bounded by
// apiTimeout); when the client refuses, the sub is forgotten again.
func subscribed[C any](d *driver, s *session, subID string, ordered bool, lookup func(context.Context) (C, error)) (*subscription, C, error) {
	var none C
	sub, err := d.newSubscription(s.id, subID, ordered)
	if err != nil {
		return nil, none, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	cons, err := lookup(ctx)
	if err != nil {
		d.forget(sub)
		return nil, none, err
	}
	return sub, cons, nil
}

// sessionSubscription is the session named sessionID, with sub subID registered for it.
func (d *driver) sessionSubscription(sessionID, subID string) (*session, *subscription, error) {
	s, err := d.session(sessionID)
	if err != nil {
		return nil, nil, err
	}
	sub, err := d.newSubscription(s.id, subID, false)
	return s, sub, err
}

func (d *driver) forget(sub *subscription) {
	d.mu.Lock()
	if d.subs[sub.id] == sub {
		delete(d.subs, sub.id)
	}
	d.mu.Unlock()
}

// running tells whether the consumption still streams (the chatty misbehaviour only talks about running ones).
func (s *subscription) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cc != nil && !s.stopped
}

// stop ends the consumption; after it returns nothing more is streamed for this sub.
func (s *subscription) stop() {
	if cc := s.markStopped(); cc != nil {
		cc.Stop()
	}
	s.mu.Lock()
	stopWatch := s.stopWatch
	s.mu.Unlock()
	if stopWatch != nil {
		stopWatch()
	}
}

// markStopped makes the sub stream nothing more and returns the consume context the caller must stop. Inside a
// ConsumeErrHandler the caller stops it from another goroutine: the ordered consumer calls the handler with its
// own lock held, which its Stop takes too.
func (s *subscription) markStopped() jetstream.ConsumeContext {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped {
		s.stopped = true
		close(s.done)
	}
	return s.cc
}

// noteConsumer streams a `reset` event the first time a new consumer name shows up for an ordered sub. The Go
// client has no reset notification: a recreated ordered consumer shows only as a new name (<prefix>_<serial>).
// Callers hold s.mu.
func (s *subscription) noteConsumerLocked(name string) {
	if name == "" || name == s.consumer {
		return
	}
	previous := s.consumer
	s.consumer = name
	if previous == "" || !s.ordered || s.stopped {
		return
	}
	s.reset = true
	s.d.writeEvent(s.session, s.id, "reset", fmt.Sprintf("ordered consumer recreated: %s replaced %s", name, previous))
}

func (s *subscription) deliver(msg jetstream.Msg) {
	s.deliverRecord(deliveryRecord(msg))
}

// deliverLegacy streams a message a JetStreamContext subscription received.
func (s *subscription) deliverLegacy(msg *nats.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		s.deliverRecord(nil, err)
		return
	}
	s.deliverRecord(deliveryFields(meta.Sequence.Stream, meta.Sequence.Consumer, msg.Subject, msg.Data, meta.Consumer), nil)
}

func (s *subscription) deliverRecord(record map[string]any, err error) {
	if err != nil {
		s.d.event(s.session, s.id, "error", "delivery without JetStream metadata: "+describe(err))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.noteConsumerLocked(record["consumer"].(string))
	if s.reset && s.d.mode("drop-deliveries-after-reset") {
		return
	}
	record["type"] = "delivery"
	record["sub"] = s.id
	s.d.write(record)
	if s.d.mode("duplicate-delivery") {
		s.d.write(record)
	}
}

// watchConsumerName polls the ordered consumer's cached info, so a reset shows even before a delivery comes from
// the new consumer (e.g. when the stream has nothing new).
func (s *subscription) watchConsumerName(cons jetstream.Consumer) {
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-ticker.C:
			if info := cons.CachedInfo(); info != nil {
				s.mu.Lock()
				s.noteConsumerLocked(info.Name)
				s.mu.Unlock()
			}
		}
	}
}

// onError is the ConsumeErrHandler: everything the client reports about the consumption becomes an event.
func (s *subscription) onError(_ jetstream.ConsumeContext, err error) {
	if errors.Is(err, jetstream.ErrNoHeartbeat) {
		s.d.event(s.session, s.id, "missed-heartbeat", describe(err))
		if s.d.mode("terminal-on-missed-heartbeat") && s.running() {
			s.d.event(s.session, s.id, "terminal", "misbehave terminal-on-missed-heartbeat: consumption stopped")
			if cc := s.markStopped(); cc != nil {
				go cc.Stop()
			}
		}
		return
	}
	s.d.event(s.session, s.id, "error", describe(err))
}

// watchClosed streams `terminal` when the client ends the consumption by itself (not through stop/close).
func (s *subscription) watchClosed(cc jetstream.ConsumeContext) {
	closed := closedOf(cc)
	if closed == nil { // consumeclosed.go, left out: this release's ConsumeContext does not say it ended
		return
	}
	select {
	case <-closed:
	case <-s.done:
		return
	}
	s.mu.Lock()
	ended := !s.stopped
	s.mu.Unlock()
	if ended {
		s.d.event(s.session, s.id, "terminal", "the client closed the consume context (ConsumeContext.Closed())")
		s.stop()
		s.d.forget(s)
	}
}

func (s *subscription) started(cc jetstream.ConsumeContext) {
	s.mu.Lock()
	s.cc = cc
	stopped := s.stopped
	s.mu.Unlock()
	if stopped { // stopped while the client was still setting up
		cc.Stop()
		return
	}
	go s.watchClosed(cc)
}

func deliveryRecord(msg jetstream.Msg) (map[string]any, error) {
	meta, err := msg.Metadata()
	if err != nil {
		return nil, err
	}
	return deliveryFields(meta.Sequence.Stream, meta.Sequence.Consumer, msg.Subject(), msg.Data(), meta.Consumer), nil
}

func deliveryFields(streamSeq, consumerSeq uint64, subject string, data []byte, consumer string) map[string]any {
	return map[string]any{
		"stream_seq":   streamSeq,
		"consumer_seq": consumerSeq,
		"subject":      subject,
		"payload_b64":  base64.StdEncoding.EncodeToString(data),
		"consumer":     consumer,
		"at_ns":        monoNs(),
	}
}

// ---------------------------------------------------------------------------------------------------------------
// Events and misbehaviour

func (d *driver) mode(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.modes[name]
}

// event streams what the client reported, unless a misbehaviour swallows it.
func (d *driver) event(sessionID, subID, kind, detail string) {
	if kind == "missed-heartbeat" && d.mode("swallow-missed-heartbeat") {
		return
	}
	if subID != "" {
		d.mu.Lock()
		sub := d.subs[subID]
		d.mu.Unlock()
		if sub != nil {
			// Under the sub's lock so that nothing is streamed for it after stop answered.
			sub.mu.Lock()
			defer sub.mu.Unlock()
			if sub.stopped && kind != "terminal" {
				return
			}
		}
	}
	d.writeEvent(sessionID, subID, kind, detail)
}

func (d *driver) writeEvent(sessionID, subID, kind, detail string) {
	var sub any
	if subID != "" {
		sub = subID
	}
	d.write(map[string]any{
		"type": "event", "session": sessionID, "sub": sub, "kind": kind, "detail": detail, "at_ns": monoNs(),
	})
}

var knownModes = map[string]bool{
	"swallow-missed-heartbeat": true, "chatty-missed-heartbeat": true, "terminal-on-missed-heartbeat": true,
	"duplicate-delivery": true, "drop-deliveries-after-reset": true,
	"watch-no-end-of-data": true, "watch-drop-first": true, "bind-any-queue": true,
	"seal-ignored": true, "status-misreport": true, "consumer-actions-rotated": true,
	"publish-no-retry": true,
}

func (d *driver) misbehave(modes []string) (any, error) {
	for _, m := range modes {
		if !knownModes[m] {
			return nil, failure("invalid", "unknown misbehave mode %q", m)
		}
	}
	d.mu.Lock()
	for _, m := range modes {
		d.modes[m] = true
	}
	startChatty := d.modes["chatty-missed-heartbeat"] && !d.chatty
	d.chatty = d.chatty || startChatty
	d.mu.Unlock()
	if startChatty {
		go d.chatter()
	}
	log.Printf("misbehaving from now on: %v", modes)
	return nil, nil
}

// chatter invents a missed-heartbeat event every 100 ms for every running consumption (a deliberate deviation).
func (d *driver) chatter() {
	for range time.Tick(chattyInterval) {
		d.mu.Lock()
		subs := make([]*subscription, 0, len(d.subs))
		for _, s := range d.subs {
			subs = append(subs, s)
		}
		d.mu.Unlock()
		for _, s := range subs {
			if s.running() {
				d.writeEvent(s.session, s.id, "missed-heartbeat", "misbehave chatty-missed-heartbeat: invented by the driver")
			}
		}
	}
}

// ---------------------------------------------------------------------------------------------------------------
// Ops on consumers

var deliverPolicies = map[string]jetstream.DeliverPolicy{
	"all":               jetstream.DeliverAllPolicy,
	"by_start_sequence": jetstream.DeliverByStartSequencePolicy,
	"by_start_time":     jetstream.DeliverByStartTimePolicy,
	"last_per_subject":  jetstream.DeliverLastPerSubjectPolicy,
}

func (d *driver) ordered(req *request) (any, error) {
	s, err := d.session(req.Session)
	if err != nil {
		return nil, err
	}
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if req.Subject != "" {
		cfg.FilterSubjects = []string{req.Subject}
	}
	if p := req.Start; p != nil {
		policy, ok := deliverPolicies[p.DeliverPolicy]
		if !ok {
			return nil, failure("invalid", "unknown deliver_policy %q", p.DeliverPolicy)
		}
		cfg.DeliverPolicy = policy
		if p.Seq != nil {
			cfg.OptStartSeq = *p.Seq
		}
		if p.Time != nil {
			t, err := time.Parse(time.RFC3339Nano, *p.Time)
			if err != nil {
				return nil, failure("invalid", "start.time: %v", err)
			}
			cfg.OptStartTime = &t
		}
	}
	if req.InactiveThresholdS != nil {
		cfg.InactiveThreshold = seconds(*req.InactiveThresholdS)
	}
	sub, cons, err := subscribed(d, s, req.Sub, true, func(ctx context.Context) (jetstream.Consumer, error) {
		return s.js.OrderedConsumer(ctx, req.Stream, cfg)
	})
	if err != nil {
		return nil, err
	}
	opts := []jetstream.PullConsumeOpt{jetstream.ConsumeErrHandler(sub.onError)}
	if req.IdleHeartbeatS != nil {
		opts = append(opts, jetstream.PullHeartbeat(seconds(*req.IdleHeartbeatS)))
	}
	watch := watchPullRequests(s.nc, req.Stream)
	cc, err := cons.Consume(sub.deliver, opts...)
	if err != nil {
		watch.cancel()
		d.forget(sub)
		// The ordered consumer creates its server consumer before it checks the options: remove what we made.
		if info := cons.CachedInfo(); info != nil {
			ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
			_ = s.js.DeleteConsumer(ctx, req.Stream, info.Name)
			cancel()
		}
		return nil, heartbeatRefused(req.IdleHeartbeatS, err)
	}
	if info := cons.CachedInfo(); info != nil {
		sub.mu.Lock()
		sub.consumer = info.Name
		sub.mu.Unlock()
	}
	heartbeat := watch.effective(req.IdleHeartbeatS, orderedDefaultHeartbeatS)
	sub.started(cc)
	go sub.watchConsumerName(cons)
	return map[string]any{"effective_idle_heartbeat_s": heartbeat}, nil
}

// acking wraps a handler so each message is acknowledged after it was streamed.
func acking(sub *subscription) jetstream.MessageHandler {
	return func(msg jetstream.Msg) {
		sub.deliver(msg)
		if err := msg.Ack(); err != nil {
			log.Printf("sub %s: ack failed: %v", sub.id, err)
		}
	}
}

func (d *driver) consume(req *request) (any, error) {
	s, err := d.session(req.Session)
	if err != nil {
		return nil, err
	}
	sub, cons, err := subscribed(d, s, req.Sub, false, func(ctx context.Context) (jetstream.Consumer, error) {
		return s.js.Consumer(ctx, req.Stream, req.Consumer)
	})
	if err != nil {
		return nil, err
	}
	opts := []jetstream.PullConsumeOpt{jetstream.ConsumeErrHandler(sub.onError)}
	if req.IdleHeartbeatS != nil {
		opts = append(opts, jetstream.PullHeartbeat(seconds(*req.IdleHeartbeatS)))
	}
	if req.ExpiresS != nil {
		opts = append(opts, jetstream.PullExpiry(seconds(*req.ExpiresS)))
	}
	if req.MaxMessages != nil {
		opts = append(opts, jetstream.PullMaxMessages(*req.MaxMessages))
	}
	sub.consumer = req.Consumer
	watch := watchPullRequests(s.nc, req.Stream)
	cc, err := cons.Consume(acking(sub), opts...)
	if err != nil {
		watch.cancel()
		d.forget(sub)
		return nil, heartbeatRefused(req.IdleHeartbeatS, err)
	}
	heartbeat := watch.effective(req.IdleHeartbeatS, consumeDefaultHeartbeat(req.ExpiresS))
	sub.started(cc)
	return map[string]any{"effective_idle_heartbeat_s": heartbeat}, nil
}

// newestMinHeartbeat is the smallest PullHeartbeat the release go.mod pins accepts (jetstream/jetstream_options.go:
// "idle_heartbeat value must be within 500ms-30s range"); releases before v1.31.0 refuse anything below 1 s.
const newestMinHeartbeat = 500 * time.Millisecond

// heartbeatRefused is Consume's refusal of the heartbeat asked for as the protocol's answer: a heartbeat the newest
// release accepts but this one refuses is not in this release (kind not_in_release), not a deviation.
func heartbeatRefused(asked *float64, err error) error {
	if asked == nil || seconds(*asked) < newestMinHeartbeat || !errors.Is(err, jetstream.ErrInvalidOption) ||
		!strings.Contains(err.Error(), "idle_heartbeat") {
		return err
	}
	return failure("not_in_release", "not in nats.go %s: PullHeartbeat(%s), which nats.go from v1.31.0 accepts "+
		"(this release: %s)", clientVersion(), seconds(*asked), describe(err))
}

// consumeDefaultHeartbeat is Consume's heartbeat when no PullHeartbeat is given (jetstream/pull.go setDefaults:
// half the expiry, at most 30 s; the expiry defaults to jetstream.DefaultExpires).
func consumeDefaultHeartbeat(expiresS *float64) float64 {
	expires := jetstream.DefaultExpires
	if expiresS != nil {
		expires = seconds(*expiresS)
	}
	return min(expires/2, 30*time.Second).Seconds()
}

// fetchHeartbeatAsked is the heartbeat a Fetch asks for (jetstream/pull.go fetchWithOpts): FetchHeartbeat as given (no
// lower bound, unlike PullHeartbeat), else 5 s for an expiry of 10 s or more and none below.
func fetchHeartbeatAsked(heartbeatS *float64, expiresS float64) any {
	switch {
	case heartbeatS != nil:
		return *heartbeatS
	case seconds(expiresS) >= 10*time.Second:
		return 5.0
	}
	return nil
}

func (d *driver) fetch(req *request) (any, error) {
	s, err := d.session(req.Session)
	if err != nil {
		return nil, err
	}
	if req.Batch == nil || req.ExpiresS == nil {
		return nil, failure("invalid", "fetch needs batch and expires_s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	cons, err := s.js.Consumer(ctx, req.Stream, req.Consumer)
	if err != nil {
		return nil, err
	}
	opts := []jetstream.FetchOpt{jetstream.FetchMaxWait(seconds(*req.ExpiresS))}
	if req.IdleHeartbeatS != nil {
		if fetchHeartbeat == nil { // fetchheartbeat.go, left out of this release's build
			return nil, lacking("fetch-heartbeat")
		}
		opts = append(opts, fetchHeartbeat(seconds(*req.IdleHeartbeatS)))
	}
	began := time.Now()
	batch, err := cons.Fetch(*req.Batch, opts...)
	if err != nil {
		return nil, err
	}
	deliveries := []map[string]any{}
	received := 0
	for msg := range batch.Messages() {
		received++
		record, err := deliveryRecord(msg)
		if err != nil {
			log.Printf("fetch: a message without JetStream metadata: %v", err)
			continue
		}
		deliveries = append(deliveries, record)
		if d.mode("duplicate-delivery") {
			deliveries = append(deliveries, record)
		}
		if err := msg.Ack(); err != nil {
			log.Printf("fetch: ack failed: %v", err)
		}
	}
	took := time.Since(began).Seconds()
	var ending any
	switch batchErr := batch.Error(); {
	case batchErr != nil && errors.Is(batchErr, jetstream.ErrNoHeartbeat) && !d.mode("swallow-missed-heartbeat"):
		ending = map[string]any{"kind": "missed-heartbeat", "detail": describe(batchErr)}
	case batchErr != nil && !errors.Is(batchErr, jetstream.ErrNoHeartbeat):
		ending = map[string]any{"kind": "error", "detail": describe(batchErr)}
	case received < *req.Batch:
		// The client ends an expired fetch without an error (MessageBatch.Error() is nil): that is its timeout.
		ending = map[string]any{"kind": "timeout", "detail": fmt.Sprintf(
			"MessageBatch.Error() = nil after %d of %d messages", received, *req.Batch)}
	}
	return map[string]any{
		"deliveries": deliveries, "error": ending, "took_s": took,
		"effective_idle_heartbeat_s": fetchHeartbeatAsked(req.IdleHeartbeatS, *req.ExpiresS),
	}, nil
}

func (d *driver) stop(id string) (any, error) {
	d.mu.Lock()
	sub := d.subs[id]
	delete(d.subs, id)
	d.mu.Unlock()
	if sub == nil {
		return nil, failure("invalid", "no sub %q", id)
	}
	sub.stop()
	return nil, nil
}

// ---------------------------------------------------------------------------------------------------------------
// The effective heartbeat: what the client really asked the server for in its pull request

const pullRequestSubject = "$JS.API.CONSUMER.MSG.NEXT."

// What the ordered consumer's Consume uses when no PullHeartbeat is given (jetstream/pull.go setDefaults: 5 s with
// the default 30 s PullExpiry); only the fallback when the pull requests cannot be watched.
const orderedDefaultHeartbeatS = 5.0

type pullRequestWatch struct {
	sub *nats.Subscription
	nc  *nats.Conn
	got chan float64
}

// watchPullRequests listens (on the same connection, which sees its own publishes) to the stream's pull
// requests, to read the idle_heartbeat the client puts in them. Without permission to listen it finds nothing.
func watchPullRequests(nc *nats.Conn, stream string) *pullRequestWatch {
	w := &pullRequestWatch{nc: nc, got: make(chan float64, 1)}
	sub, err := nc.Subscribe(pullRequestSubject+stream+".>", func(m *nats.Msg) {
		var body struct {
			Heartbeat int64 `json:"idle_heartbeat"`
		}
		if json.Unmarshal(m.Data, &body) == nil {
			select {
			case w.got <- time.Duration(body.Heartbeat).Seconds():
			default:
			}
		}
	})
	if err == nil {
		w.sub = sub
	}
	return w
}

func (w *pullRequestWatch) cancel() {
	if w.sub != nil {
		_ = w.sub.Unsubscribe()
	}
}

// effective is the heartbeat the first pull request asked for (null: none); when the request could not be seen,
// the one given (PullHeartbeat refuses a bad value, never adjusts it) or else the client's default.
func (w *pullRequestWatch) effective(given *float64, fallback float64) any {
	if hb, seen := w.heartbeat(); seen {
		if hb == 0 {
			return nil
		}
		return hb
	}
	if given != nil {
		return *given
	}
	return fallback
}

// heartbeat is the first pull request's idle heartbeat in seconds; seen is false when none was seen in time.
func (w *pullRequestWatch) heartbeat() (seconds float64, seen bool) {
	if w.sub == nil {
		return 0, false
	}
	defer w.sub.Unsubscribe()
	_ = w.nc.FlushTimeout(2 * time.Second)
	select {
	case hb := <-w.got:
		return hb, true
	case <-time.After(500 * time.Millisecond):
		log.Printf("no pull request seen: effective heartbeat taken from the client's documented default")
		return 0, false
	}
}

// ---------------------------------------------------------------------------------------------------------------

func main() {
	log.SetFlags(log.Lmicroseconds)
	log.SetPrefix("nats.go driver: ")
	d := newDriver()
	written := make(chan struct{})
	go d.writer(written)

	finish := func() {
		d.wg.Wait()
		d.mu.Lock()
		ids := make([]string, 0, len(d.sessions))
		for id := range d.sessions {
			ids = append(ids, id)
		}
		d.mu.Unlock()
		for _, id := range ids {
			d.closeSession(id)
		}
		d.closeOutput()
		<-written
		os.Exit(0)
	}

	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if line == "" {
			continue
		}
		var req request
		if err := json.Unmarshal([]byte(line), &req); err != nil || req.ID == nil {
			var only struct{ ID *int64 }
			if json.Unmarshal([]byte(line), &only) == nil && only.ID != nil {
				d.respond(*only.ID, nil, failure("invalid", "unreadable request: %v", err))
			} else {
				log.Printf("unreadable request line (%d bytes) ignored: it has no id to answer", len(line))
			}
			continue
		}
		req.Raw = []byte(line)
		if req.Op == "shutdown" {
			d.wg.Wait()
			d.respond(*req.ID, nil, nil)
			finish()
		}
		d.wg.Add(1)
		go func(req request) {
			defer d.wg.Done()
			result, err := d.handle(&req)
			d.respond(*req.ID, result, err)
		}(req)
	}
	finish()
}

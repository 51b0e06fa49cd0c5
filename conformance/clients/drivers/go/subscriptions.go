// Subscriptions: one continuous consumption (ordered, push or pull consume) and its bookkeeping: its deliveries,
// its consumer's name, its end.

package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

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

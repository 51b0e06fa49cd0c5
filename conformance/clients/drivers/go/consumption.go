// The consumption ops (../PROTOCOL.md "Ops (v1)": ordered, consume, fetch, stop) and the effective heartbeat: what
// the client really asked the server for in its pull requests.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

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

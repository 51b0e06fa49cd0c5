//jetcheck:feature push
//jetcheck:ops push

// Push consumers (../PROTOCOL.md `push`) through the jetstream package's PushConsumer; binding an existing one with
// a queue the application names goes through the JetStreamContext API (legacyBind).

package main

import (
	"context"
	"errors"
	"log"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func init() { handles((*driver).push, "push") }

func (d *driver) push(req *request) (any, error) {
	s, err := d.session(req.Session)
	if err != nil {
		return nil, err
	}
	cfg := jetstream.ConsumerConfig{
		DeliverSubject: s.nc.NewInbox(),
		AckPolicy:      jetstream.AckNonePolicy,
		FilterSubject:  req.Subject,
	}
	if req.IdleHeartbeatS != nil {
		cfg.IdleHeartbeat = seconds(*req.IdleHeartbeatS)
	}
	cfg.Durable = req.Durable
	cfg.DeliverGroup = req.Queue
	if req.InactiveThresholdS != nil {
		cfg.InactiveThreshold = seconds(*req.InactiveThresholdS)
	}
	var created bool
	sub, cons, err := subscribed(d, s, req.Sub, false, func(ctx context.Context) (c jetstream.PushConsumer, err error) {
		c, created, err = pushConsumer(ctx, s.js, req.Stream, cfg)
		return c, err
	})
	if err != nil {
		return nil, err
	}
	info := cons.CachedInfo()
	var cc jetstream.ConsumeContext
	if !created && info.Config.DeliverGroup != req.Queue && !d.mode("bind-any-queue") {
		cc, err = legacyBind(s, req, info.Name, sub)
	} else {
		cc, err = cons.Consume(sub.deliver, jetstream.ConsumeErrHandler(sub.onError))
	}
	if err != nil {
		d.forget(sub)
		return nil, err
	}
	sub.mu.Lock()
	sub.consumer = info.Name
	sub.mu.Unlock()
	sub.started(cc)
	var heartbeat any // push Consume watches the consumer's own idle_heartbeat (2 intervals); null: none
	if info.Config.IdleHeartbeat > 0 {
		heartbeat = info.Config.IdleHeartbeat.Seconds()
	}
	return map[string]any{"consumer": info.Name, "effective_idle_heartbeat_s": heartbeat}, nil
}

// pushConsumer binds a durable push consumer that exists as it is (a second queue member must not move its deliver
// subject), and creates it otherwise (created: true).
func pushConsumer(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) (jetstream.PushConsumer, bool, error) {
	if cfg.Durable != "" {
		cons, err := js.PushConsumer(ctx, stream, cfg.Durable)
		if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return cons, false, err
		}
	}
	cons, err := js.CreateOrUpdatePushConsumer(ctx, stream, cfg)
	return cons, true, err
}

// legacyBind subscribes to the existing push consumer `durable` with the queue the application names (none when
// req.Queue is empty). The jetstream package's Consume always joins the consumer's own deliver_group, so it cannot be
// asked for another queue; the JetStreamContext API can, and refuses one that does not match (nats.go PR #794).
func legacyBind(s *session, req *request, durable string, sub *subscription) (jetstream.ConsumeContext, error) {
	js, err := s.nc.JetStream()
	if err != nil {
		return nil, err
	}
	handler := func(msg *nats.Msg) { sub.deliverLegacy(msg) }
	var bound *nats.Subscription
	if req.Queue == "" {
		bound, err = js.Subscribe(req.Subject, handler, nats.Bind(req.Stream, durable))
	} else {
		bound, err = js.QueueSubscribe(req.Subject, req.Queue, handler, nats.Bind(req.Stream, durable))
	}
	if err != nil {
		if f := classify(err); f.Kind != "other" {
			return nil, f
		}
		return nil, failure("invalid", "%s", describe(err)) // the client's own refusal, before any subscription
	}
	return &legacyConsumption{sub: bound, closed: make(chan struct{})}, nil
}

// legacyConsumption is a JetStreamContext subscription seen as the jetstream package's ConsumeContext.
type legacyConsumption struct {
	sub    *nats.Subscription
	once   sync.Once
	closed chan struct{}
}

func (c *legacyConsumption) end(unsubscribe func() error) {
	c.once.Do(func() {
		if err := unsubscribe(); err != nil {
			log.Printf("legacy subscription: %v", err)
		}
		close(c.closed)
	})
}

func (c *legacyConsumption) Stop()                   { c.end(c.sub.Unsubscribe) }
func (c *legacyConsumption) Drain()                  { c.end(c.sub.Drain) }
func (c *legacyConsumption) Closed() <-chan struct{} { return c.closed }

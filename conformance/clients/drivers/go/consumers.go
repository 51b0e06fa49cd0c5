//jetcheck:feature consumer-actions
//jetcheck:ops consumer_add

// Consumer create, update and create-or-update (../PROTOCOL.md "consumer_add") over jetstream.JetStream's
// CreateConsumer, UpdateConsumer and CreateOrUpdateConsumer; the info leaves as the client's ConsumerInfo JSON.

package main

import (
	"context"
	"encoding/json"

	"github.com/nats-io/nats.go/jetstream"
)

func init() { handles((*driver).consumerAdd, "consumer_add") }

type consumerAddRequest struct {
	Stream string          `json:"stream"`
	Action string          `json:"action"`
	Config json.RawMessage `json:"config"`
}

func (d *driver) consumerAdd(req *request) (any, error) {
	s, err := d.session(req.Session)
	if err != nil {
		return nil, err
	}
	var args consumerAddRequest
	if json.Unmarshal(req.Raw, &args) != nil || args.Stream == "" || len(args.Config) == 0 {
		return nil, failure("invalid", "consumer_add needs \"stream\", \"action\" and \"config\"")
	}
	var cfg jetstream.ConsumerConfig
	if err := json.Unmarshal(args.Config, &cfg); err != nil {
		return nil, failure("invalid", "consumer_add: config: %v", err)
	}
	action := args.Action
	if d.mode("consumer-actions-rotated") { // misbehave: each call made with another of the client's calls
		action = map[string]string{"create": "update", "update": "create", "create_or_update": "create"}[action]
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	var consumer jetstream.Consumer
	switch action {
	case "create":
		consumer, err = s.js.CreateConsumer(ctx, args.Stream, cfg)
	case "update":
		consumer, err = s.js.UpdateConsumer(ctx, args.Stream, cfg)
	case "create_or_update":
		consumer, err = s.js.CreateOrUpdateConsumer(ctx, args.Stream, cfg)
	default:
		return nil, failure("invalid", "consumer_add: unknown action %q", args.Action)
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"info": consumer.CachedInfo()}, nil
}

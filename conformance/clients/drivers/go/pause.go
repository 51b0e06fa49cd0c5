//jetcheck:feature consumer-pause
//jetcheck:ops js_pause js_resume

// js_pause / js_resume: JetStream.PauseConsumer / ResumeConsumer (ADR-42's pause, server 2.11).

package main

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func init() {
	handles(feature((*driver).pause), "js_pause")
	handles(feature((*driver).resume), "js_resume")
}

func (d *driver) pause(ctx context.Context, s *session, args featureRequest) (any, error) {
	until, err := time.Parse(time.RFC3339Nano, args.Until)
	if err != nil {
		return nil, failure("invalid", "until: %v", err)
	}
	return pauseState(s.js.PauseConsumer(ctx, args.Stream, args.Consumer, until))
}

func (d *driver) resume(ctx context.Context, s *session, args featureRequest) (any, error) {
	if d.mode("resume-ignored") {
		return map[string]any{"paused": false}, nil
	}
	return pauseState(s.js.ResumeConsumer(ctx, args.Stream, args.Consumer))
}

func pauseState(r *jetstream.ConsumerPauseResponse, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	state := map[string]any{"paused": r.Paused}
	if !r.PauseUntil.IsZero() {
		state["pause_until"] = r.PauseUntil.UTC().Format(time.RFC3339Nano)
	}
	return state, nil
}

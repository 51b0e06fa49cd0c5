// Server features of 2.11/2.12 a client may expose (../PROTOCOL.md "Server features"): js_publish (ttlpublish.go),
// js_pause / js_resume (pause.go) and js_group_fetch (groupfetch.go). Each is a feature of its own: releases
// gained them one by one.

package main

import (
	"context"
	"encoding/json"
)

func init() {
	for _, m := range featureModes {
		knownModes[m] = true
	}
}

// featureModes: js_publish sends no TTL; js_resume asks nothing; js_group_fetch takes a fresh consumer handle for
// every pull, so the client has no pin id to send; min-pending-dropped: js_group_fetch pulls without min_pending.
var featureModes = []string{"ttl-dropped", "resume-ignored", "pin-forgotten", "min-pending-dropped"}

type featureRequest struct {
	Subject  string   `json:"subject"`
	DataB64  string   `json:"data_b64"`
	TTLS     *float64 `json:"ttl_s"`
	Stream   string   `json:"stream"`
	Consumer string   `json:"consumer"`
	Until    string   `json:"until"`
	Group    string   `json:"group"`
	Batch    int      `json:"batch"`
	ExpiresS float64  `json:"expires_s"`
	// MinPending: an overflow pull's min_pending (jetstream.FetchMinPending); nil for none
	MinPending *int64 `json:"min_pending"`
}

type featureOp func(d *driver, ctx context.Context, s *session, args featureRequest) (any, error)

// feature reads a feature op's request and its session, and calls op bounded by apiTimeout.
func feature(op featureOp) opHandler {
	return func(d *driver, req *request) (any, error) {
		var args featureRequest
		if err := json.Unmarshal(req.Raw, &args); err != nil {
			return nil, failure("invalid", "unreadable %s request: %v", req.Op, err)
		}
		return d.inSession(req.Session, apiTimeout, func(ctx context.Context, s *session) (any, error) {
			return op(d, ctx, s, args)
		})
	}
}

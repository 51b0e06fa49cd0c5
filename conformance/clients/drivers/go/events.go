// Events and misbehaviour (../PROTOCOL.md "Streamed records" and "Ops (v1)": misbehave): what the client reported,
// and the modes that make this driver misreport it on purpose.

package main

import (
	"log"
	"time"
)

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

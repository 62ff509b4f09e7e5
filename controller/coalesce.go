package controller

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	webappv1ac "github.com/example/webapp-operator/applyconfig/apis/v1"
)

// DefaultProgressInterval is how long after a status write of a WebApp a change of progress alone (counts and
// messages, with the same condition statuses, reasons and observedGeneration) waits before it is written: a
// rollout's intermediate steps are merged into one write, or into the write of its end.
const DefaultProgressInterval = 10 * time.Second

// statusPace remembers, per WebApp, the shape of the status last written (observedGeneration and each
// condition's type, status, reason and observedGeneration) and when.
type statusPace struct {
	mu sync.Mutex
	m  map[types.NamespacedName]statusWrite
}

type statusWrite struct {
	shape string
	at    time.Time
}

// shape is what of a status is written at once when it changes: everything but counts and messages.
func shape(ac *webappv1ac.WebAppApplyConfiguration) string {
	var b strings.Builder
	st := ac.Status
	if st == nil {
		return ""
	}
	if st.ObservedGeneration != nil {
		fmt.Fprintf(&b, "%d", *st.ObservedGeneration)
	}
	for _, c := range st.Conditions {
		fmt.Fprintf(&b, "|%s=%s/%s/%d", deref(c.Type), deref(c.Status), deref(c.Reason), deref(c.ObservedGeneration))
	}
	return b.String()
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// wait returns how long the status want of key must wait: zero unless its shape equals that of the status last
// written for key less than interval ago.
func (p *statusPace) wait(key types.NamespacedName, want *webappv1ac.WebAppApplyConfiguration, interval time.Duration, now time.Time) time.Duration {
	if interval <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.m[key]
	if !ok || last.shape != shape(want) {
		return 0
	}
	return max(last.at.Add(interval).Sub(now), 0)
}

// written notes a status write of key.
func (p *statusPace) written(key types.NamespacedName, want *webappv1ac.WebAppApplyConfiguration, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[types.NamespacedName]statusWrite{}
	}
	p.m[key] = statusWrite{shape: shape(want), at: now}
}

func (p *statusPace) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, key)
}

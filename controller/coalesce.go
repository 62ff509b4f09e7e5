package controller

import (
	"fmt"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv1ac "github.com/example/webapp-operator/applyconfig/apis/v1"
)

// DefaultProgressInterval is how long after a status write of a WebApp a change of a rollout's progress alone
// (counts and messages while Ready stays False with reason DeploymentProgressing, the other condition statuses,
// reasons and observedGeneration unchanged) waits before it is written: a rollout's intermediate steps are merged
// into one write, or into the write of its end. Errors, Ready and a new generation are written at once.
const DefaultProgressInterval = 10 * time.Second

// statusPace remembers, per WebApp, the shape of the status last written (observedGeneration and each
// condition's type, status, reason and observedGeneration) and when. It is kept by name with the WebApp's UID: a
// WebApp deleted and created again under the same name is another one, which owes nothing to the old one's pace.
type statusPace struct {
	mu sync.Mutex
	m  map[types.NamespacedName]statusWrite
}

type statusWrite struct {
	uid   types.UID
	shape string
	at    time.Time
	// retained is the status.retainedFields written, for a reconcile whose cached WebApp is behind that write.
	retained []webappv1.RetainedField
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
	// A retained field is known only when the apply that let go of it finds it kept: it is written at once.
	for _, f := range st.RetainedFields {
		fmt.Fprintf(&b, "|retained %s %s %v", deref(f.Kind), deref(f.Field), f.Managers)
	}
	return b.String()
}

// progressing reports whether want's Ready condition is False with reason DeploymentProgressing.
func progressing(want *webappv1ac.WebAppApplyConfiguration) bool {
	if want.Status == nil {
		return false
	}
	for _, c := range want.Status.Conditions {
		if deref(c.Type) == webappv1.ConditionReady {
			return deref(c.Status) == metav1.ConditionFalse && deref(c.Reason) == ReasonDeploymentProgressing
		}
	}
	return false
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
func (p *statusPace) wait(key types.NamespacedName, uid types.UID, want *webappv1ac.WebAppApplyConfiguration, interval time.Duration, now time.Time) time.Duration {
	if interval <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.m[key]
	if !ok || last.uid != uid || last.shape != shape(want) || !progressing(want) {
		return 0
	}
	return max(last.at.Add(interval).Sub(now), 0)
}

// written notes a status write of key, the WebApp uid.
func (p *statusPace) written(key types.NamespacedName, uid types.UID, want *webappv1ac.WebAppApplyConfiguration, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[types.NamespacedName]statusWrite{}
	}
	var retained []webappv1.RetainedField
	if want.Status != nil {
		for _, f := range want.Status.RetainedFields {
			retained = append(retained, webappv1.RetainedField{Kind: deref(f.Kind), Field: deref(f.Field), Managers: f.Managers})
		}
	}
	p.m[key] = statusWrite{uid: uid, shape: shape(want), at: now, retained: retained}
}

// lastRetained is the status.retainedFields of the last status written for key, the WebApp uid, if one was.
func (p *statusPace) lastRetained(key types.NamespacedName, uid types.UID) ([]webappv1.RetainedField, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.m[key]
	if !ok || last.uid != uid {
		return nil, false
	}
	return last.retained, true
}

func (p *statusPace) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, key)
}

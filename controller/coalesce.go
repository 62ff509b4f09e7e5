package controller

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	webappv2ac "github.com/example/webapp-operator/applyconfig/apis/v2"
)

// DefaultProgressInterval is how long after a status write of a WebApp a change of a rollout's progress alone
// (counts and messages while Ready stays False with reason DeploymentProgressing, the other condition statuses,
// reasons and observedGeneration unchanged) waits before it is written: a rollout's intermediate steps are merged
// into one write, or into the write of its end. Errors, Ready and a new generation are written at once.
const DefaultProgressInterval = 10 * time.Second

// shape is what of a status is written at once when it changes: everything but counts and messages.
func shape(ac *webappv2ac.WebAppApplyConfiguration) string {
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
	// Who sets the count changes with the HPA's existence, not with a rollout's progress: it is written at once.
	if st.ReplicasSetBy != nil {
		fmt.Fprintf(&b, "|count by %s", *st.ReplicasSetBy)
	}
	// A retained field is known only when the apply that let go of it finds it kept: it is written at once.
	for _, f := range st.RetainedFields {
		fmt.Fprintf(&b, "|retained %s %s %v", deref(f.Kind), deref(f.Field), f.Managers)
	}
	return b.String()
}

// progressing reports whether want's Ready condition is False with reason DeploymentProgressing.
func progressing(want *webappv2ac.WebAppApplyConfiguration) bool {
	if want.Status == nil {
		return false
	}
	for _, c := range want.Status.Conditions {
		if deref(c.Type) == webappv2.ConditionReady {
			return deref(c.Status) == metav1.ConditionFalse && deref(c.Reason) == webappv2.ReasonDeploymentProgressing
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

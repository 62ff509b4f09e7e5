package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	webappv2ac "github.com/example/webapp-operator/applyconfig/apis/v2"
)

// progressStatus is a status whose Ready is False with reason DeploymentProgressing (the one a pace may hold),
// with the retained fields given.
func progressStatus(retained ...string) *webappv2ac.WebAppApplyConfiguration {
	st := webappv2ac.WebAppStatus().WithObservedGeneration(1).WithConditions(metav1ac.Condition().
		WithType(webappv2.ConditionReady).WithStatus(metav1.ConditionFalse).WithReason(webappv2.ReasonDeploymentProgressing).WithObservedGeneration(1))
	for _, f := range retained {
		st.WithRetainedFields(webappv2ac.RetainedField().WithKind("Deployment").WithField(f).WithManagers("ops"))
	}
	return webappv2ac.WebApp("web", "ns").WithStatus(st)
}

func TestStatusPace(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	byHPA := progressStatus()
	byHPA.Status.WithReplicasSetBy(webappv2.ReplicasSetByHPA)
	cases := []struct {
		name string
		uid  types.UID
		want *webappv2ac.WebAppApplyConfiguration
		at   time.Time
		wait time.Duration
	}{
		{"progress alone waits out the interval", "a", progressStatus(), t0.Add(3 * time.Second), 7 * time.Second},
		{"after the interval, written", "a", progressStatus(), t0.Add(11 * time.Second), 0},
		// Another WebApp of the same name (deleted and created again) owes nothing to the old one's pace.
		{"a new WebApp under the name", "b", progressStatus(), t0.Add(3 * time.Second), 0},
		// A retained field is found once, by the apply that lets go of it: never held.
		{"a retained field is written at once", "a", progressStatus(".spec.x"), t0.Add(3 * time.Second), 0},
		// The HPA that now exists decides the count: told at once, not held as progress.
		{"who sets the count is written at once", "a", byHPA, t0.Add(3 * time.Second), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &memory{}
			m.statusWritten(key, "a", progressStatus(), t0)
			if got := m.statusWait(key, tc.uid, tc.want, 10*time.Second, tc.at); got != tc.wait {
				t.Errorf("wait = %v, want %v", got, tc.wait)
			}
		})
	}
	m := &memory{}
	m.statusWritten(key, "a", progressStatus(".spec.x"), t0)
	if got, ok := m.lastRetained(key, "a"); !ok || len(got) != 1 || got[0].Field != ".spec.x" || got[0].Managers[0] != "ops" {
		t.Errorf("lastRetained = %+v, %v; want the one written", got, ok)
	}
	if _, ok := m.lastRetained(key, "b"); ok {
		t.Error("lastRetained of another WebApp of the same name: found, want none")
	}
}

// A retained field found by an apply whose status write then fails is kept until a status is stored: the apply
// that let go of the field is the only one that could tell.
func TestRetainedFieldsFoundAreKeptUntilAStatusIsStored(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	f := []webappv2.RetainedField{{Kind: "Deployment", Field: ".spec.x", Managers: []string{"ops"}}}
	m := &memory{}
	m.retainedFound(key, "a", f)
	m.retainedFound(key, "a", nil)
	if got := m.retainedPending(key, "a"); len(got) != 1 || got[0].Field != ".spec.x" {
		t.Errorf("pending = %+v, want the field found", got)
	}
	if got := m.retainedPending(key, "b"); got != nil {
		t.Errorf("pending for another WebApp of the name = %+v, want none", got)
	}
	m.retainedStored(key)
	if got := m.retainedPending(key, "a"); got != nil {
		t.Errorf("pending after a status was stored = %+v, want none", got)
	}
}

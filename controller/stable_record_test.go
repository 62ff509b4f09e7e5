package controller

import (
	"time"

	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/internal/apptest"
)

// TestDesiredStableRecord: the record holds the spec's template while the spec's version is stable or promoted, the
// held one while a canary holds the stable version, none without a strategy, and nothing is built (the record is
// left as it is) when the canary is undecided or the held template unknown.
func TestDesiredStableRecord(t *testing.T) {
	app := apptest.NewApp("web", 2, 8080, "shop:2")
	app.Spec.Rollout.Canary = &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 50}}}
	spec, err := desired.Deployment(app, desired.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	held := corev1ac.PodTemplateSpec().WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("app").WithImage("shop:1")))
	decided := func(phase canary.Phase, hold bool, held *corev1ac.PodTemplateSpecApplyConfiguration) *canaryRun {
		return &canaryRun{revision: "rev2", hold: hold, held: held,
			decision: canary.Decision{Phase: phase, State: canary.State{Stable: "rev1", Canary: "rev2"}}}
	}
	for _, c := range []struct {
		name     string
		run      *canaryRun
		wantRev  string
		wantTmpl *corev1ac.PodTemplateSpecApplyConfiguration // nil: no record
		wantErr  bool
	}{
		{name: "no strategy", run: nil},
		{name: "undecided", run: &canaryRun{err: errStableUnknown}, wantErr: true},
		{name: "stable", run: decided(canary.PhaseStable, false, nil), wantRev: "rev2", wantTmpl: spec.Spec.Template},
		{name: "promoting", run: decided(canary.PhasePromoting, false, nil), wantRev: "rev2", wantTmpl: spec.Spec.Template},
		{name: "canary", run: decided(canary.PhaseCanary, true, held), wantRev: "rev1", wantTmpl: held},
		{name: "rolled back", run: decided(canary.PhaseRolledBack, true, held), wantRev: "rev1", wantTmpl: held},
		{name: "held unknown", run: decided(canary.PhaseCanary, true, nil), wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := desiredStableRecord(app, inputs{canary: c.run})
			switch {
			case (err != nil) != c.wantErr:
				t.Fatalf("error %v, want one: %v", err, c.wantErr)
			case c.wantTmpl == nil && got != nil:
				t.Fatalf("a record without one wanted: %v", got)
			case c.wantTmpl == nil:
				return
			}
			if rev := got.Annotations[webappv2.AnnotationRevision]; rev != c.wantRev || *got.Name != "web-stable" {
				t.Errorf("record %s of revision %s, want web-stable of %s", *got.Name, rev, c.wantRev)
			}
			// What it holds is what a canary reads back, and what our manager would own of it compares equal.
			cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Annotations: got.Annotations}, Data: *got.Data}
			if back := heldTemplate(cr, c.wantRev); apptest.JSON(t, back) != apptest.JSON(t, c.wantTmpl) {
				t.Errorf("held back %s, want %s", apptest.JSON(t, back), apptest.JSON(t, c.wantTmpl))
			}
			if heldTemplate(cr, "other") != nil {
				t.Errorf("a record of another revision was read as the stable one's")
			}
			if recordReplaced(cr, got) {
				t.Errorf("a record replaced by itself")
			}
		})
	}
}

// TestRecordReplacedAndExtracted: a record is replaced when its data or revision differ (its data is immutable),
// and what our manager owns of it compares equal whatever the order of the server's keys.
func TestRecordReplacedAndExtracted(t *testing.T) {
	app := apptest.NewApp("web", 2, 8080, "shop:1")
	app.Spec.Rollout.Canary = &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 50}}}
	run := &canaryRun{revision: "rev1", decision: canary.Decision{Phase: canary.PhaseStable, State: canary.State{Stable: "rev1"}}}
	want, err := desiredStableRecord(app, inputs{canary: run})
	if err != nil {
		t.Fatal(err)
	}
	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Annotations: want.Annotations}, Data: *want.Data}
	other := app.DeepCopy()
	other.Spec.Image = "shop:2"
	next, err := desiredStableRecord(other, inputs{canary: run})
	if err != nil {
		t.Fatal(err)
	}
	if !recordReplaced(cr, next) {
		t.Errorf("a record of another template not replaced")
	}
	renamed := cr.DeepCopy()
	renamed.Annotations = map[string]string{webappv2.AnnotationRevision: "rev0"}
	if !recordReplaced(renamed, want) {
		t.Errorf("a record of another revision not replaced")
	}
	// The server's JSON (keys in another order, spaces) is the same data.
	var generic map[string]any
	if err := json.Unmarshal(want.Data.Raw, &generic); err != nil {
		t.Fatal(err)
	}
	pretty, _ := json.MarshalIndent(generic, "", "  ")
	served := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Annotations: want.Annotations}, Data: runtime.RawExtension{Raw: pretty}}
	if recordReplaced(served, want) {
		t.Errorf("the same data in another layout replaced")
	}
}

// TestStateOfKeepsAPromotionPromoted: a status that says Promoting is at the end of the plan, however many steps the
// plan has now.
func TestStateOfKeepsAPromotionPromoted(t *testing.T) {
	plan := canary.Plan{Steps: []canary.Step{{Weight: 20}, {Weight: 50}, {Weight: 80}}}
	for _, c := range []struct {
		phase string
		step  int32
		want  int
	}{
		{phase: "Promoting", step: 1, want: 3},
		{phase: "Promoting", step: 2, want: 3},
		{phase: "Canary", step: 1, want: 1},
		{phase: "RolledBack", step: 1, want: 1},
	} {
		s := stateOf(&webappv2.CanaryStatus{Phase: c.phase, Step: c.step, StableRevision: "a", CanaryRevision: "b"}, plan, "b")
		if s.Step != c.want {
			t.Errorf("%s at step %d: state at step %d, want %d", c.phase, c.step, s.Step, c.want)
		}
	}
}

// TestAStrategyOfTheOtherKindStartsAgain: a canary whose strategy turned from steps into a blue/green (or back) while
// it ran its steps starts again at the new one's first step, so a blue/green's switch never comes without its own
// preview; one that kept its kind, a promotion, and a status that predates the field resume as they were.
func TestAStrategyOfTheOtherKindStartsAgain(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 12, 7, 22, 0, 0, 0, time.UTC))
	steps := canary.Plan{Steps: []canary.Step{{Weight: 20}, {Weight: 50}, {Weight: 80}}}
	blueGreen := canary.Plan{BlueGreen: true, Steps: []canary.Step{{Size: 100, Gate: true}, {Weight: 100, Size: 100}}}
	for _, c := range []struct {
		name     string
		plan     canary.Plan
		phase    string
		strategy string
		step     int32
		want     int
	}{
		{"steps at their second step turned into a blue/green: at its preview", blueGreen, "Canary", canary.KindSteps, 1, 0},
		{"steps at their third step turned into a blue/green: at its preview", blueGreen, "Canary", canary.KindSteps, 2, 0},
		{"a blue/green switched turned into steps: at their first", steps, "Canary", canary.KindBlueGreen, 1, 0},
		{"a blue/green at its switch: at its switch", blueGreen, "Canary", canary.KindBlueGreen, 1, 1},
		{"steps at their second step: there", steps, "Canary", canary.KindSteps, 1, 1},
		{"a status that predates the field: as it was", blueGreen, "Canary", "", 1, 1},
		{"being promoted: promoted", blueGreen, "Promoting", canary.KindSteps, 3, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := stateOf(&webappv2.CanaryStatus{Phase: c.phase, Step: c.step, Strategy: c.strategy, StableRevision: "a", CanaryRevision: "b",
				StepStartedAt: &since, GateSince: &since, HeldReplicas: 3}, c.plan, "b")
			if s.Step != c.want {
				t.Errorf("state at step %d, want %d", s.Step, c.want)
			}
			if restarted := s.Step == 0 && s.Since.IsZero() && s.GateSince.IsZero() && s.Held == 0; restarted != (c.want == 0) {
				t.Errorf("started again: %v (since %s, gate since %s, held %d)", restarted, s.Since, s.GateSince, s.Held)
			}
		})
	}
	// A new version in the same change: the canary the spec left is left from where it was (its pods retire, the
	// traffic having reached them), not from a first step it never ran under the new kind.
	left := stateOf(&webappv2.CanaryStatus{Phase: "Canary", Step: 1, Strategy: canary.KindSteps, StableRevision: "a", CanaryRevision: "b", StepStartedAt: &since}, blueGreen, "c")
	if left.Step != 1 || left.Since.IsZero() {
		t.Errorf("a canary left by a new version in the same change: at step %d since %s, want step 1 as it was", left.Step, left.Since)
	}
	if d := canary.Next(blueGreen, left, canary.Observation{Revision: "c", Deployed: "a"}, since.Add(time.Minute)); d.State.Retiring != "b" {
		t.Errorf("a canary left by a new version in the same change does not retire: %+v", d.State)
	}
}

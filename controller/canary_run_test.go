package controller

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/internal/apptest"
	"github.com/example/webapp-operator/controller/pods"
	"github.com/example/webapp-operator/controller/status"
)

func TestSplitPods(t *testing.T) {
	app := apptest.NewApp("shop", 3, 8080, "shop:1")
	pod := func(name string, labels map[string]string) *pods.Pod {
		return &pods.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	podList := []*pods.Pod{
		pod("s1", map[string]string{webappv2.LabelInstance: "shop"}),
		pod("c1", map[string]string{webappv2.LabelInstance: "shop", webappv2.LabelCanaryOf: "shop"}),
		pod("c2", map[string]string{webappv2.LabelCanaryOf: "shop"}),
		pod("s2", map[string]string{webappv2.LabelInstance: "shop", webappv2.LabelCanaryOf: "other"}),
	}
	stable, canary := splitPods(app, podList)
	names := func(ps []*pods.Pod) (out []string) {
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	if got := names(stable); !slices.Equal(got, []string{"s1", "s2"}) {
		t.Errorf("stable %v", got)
	}
	if got := names(canary); !slices.Equal(got, []string{"c1", "c2"}) {
		t.Errorf("canary %v", got)
	}
}

func TestCanaryReplaced(t *testing.T) {
	dep := func(rev string) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		if rev != "" {
			d.Annotations = map[string]string{webappv2.AnnotationRevision: rev}
		}
		return d
	}
	want := func(rev string) *appsv1ac.DeploymentApplyConfiguration {
		return appsv1ac.Deployment("web-canary", "ns").WithAnnotations(map[string]string{webappv2.AnnotationRevision: rev})
	}
	for _, c := range []struct {
		name string
		cur  *appsv1.Deployment
		want *appsv1ac.DeploymentApplyConfiguration
		is   bool
	}{
		{name: "the same version: applied", cur: dep("b"), want: want("b")},
		{name: "another version: replaced", cur: dep("b"), want: want("c"), is: true},
		{name: "no revision on it (not written by a canary): applied", cur: dep(""), want: want("c")},
		{name: "none wanted: not a replacement", cur: dep("b"), want: nil},
	} {
		if got := canaryReplaced(c.cur, c.want); got != c.is {
			t.Errorf("%s: canaryReplaced = %v, want %v", c.name, got, c.is)
		}
	}
}

// storedStatus is the status.canary of decision d as the API server keeps it (through JSON).
func storedStatus(t *testing.T, d canary.Decision, plan canary.Plan) webappv2.CanaryStatus {
	t.Helper()
	var st webappv2.CanaryStatus
	if err := desired.RoundTrip(status.CanaryStatus(d, plan), &st); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var stored webappv2.CanaryStatus
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	return stored
}

// TestThePreviousVersionRoundTripsThroughTheStatus: the version a promotion replaced, and its window's end, read
// back from the status as the state that wrote them (so a restart keeps the window, and costs no write).
func TestThePreviousVersionRoundTripsThroughTheStatus(t *testing.T) {
	spec := &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 20}}, RollbackWindowSeconds: 600}
	plan := planOf(spec, false)
	at := time.Date(2026, 12, 7, 4, 0, 0, 700_000_000, time.UTC)
	d := canary.Next(plan, canary.State{Stable: "a", Canary: "b", Step: 1, Since: at.Add(-time.Minute)},
		canary.Observation{Revision: "b", Deployed: "b", StableRolledOut: true}, at)
	if d.State.Previous != "a" {
		t.Fatalf("promoted without the previous version: %+v", d.State)
	}
	stored := storedStatus(t, d, plan)
	back := stateOf(&stored, plan, "")
	if back.Previous != "a" || !back.PreviousUntil.Equal(at.Add(10*time.Minute).Truncate(time.Second)) {
		t.Errorf("read back: previous %q until %v, want a until %v", back.Previous, back.PreviousUntil, at.Add(10*time.Minute).Truncate(time.Second))
	}
	if again := status.CanaryStatus(canary.Decision{State: back, Phase: d.Phase}, plan); apptest.JSON(t, again) != apptest.JSON(t, status.CanaryStatus(d, plan)) {
		t.Errorf("the status read back is written again differently:\n%s\n%s", apptest.JSON(t, again), apptest.JSON(t, status.CanaryStatus(d, plan)))
	}
}

// TestChecksValuesRoundTripThroughTheStatus: the checks' last values the status keeps read back as the same state,
// so a reconcile that saw no new round writes nothing (the values are the status's words, times to the second).
func TestChecksValuesRoundTripThroughTheStatus(t *testing.T) {
	spec := &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 20, PauseSeconds: 60}},
		Checks: []webappv2.CanaryCheck{
			{Name: "errors", Prometheus: &webappv2.PrometheusQuery{Address: "http://prometheus:9090", Query: `sum(rate(x[1m]))`}, Max: "0.05"},
			{Name: "latency", Prometheus: &webappv2.PrometheusQuery{Address: "http://prometheus:9090", Query: `histogram_quantile(0.99, y)`}, Max: "0.5", FailuresAllowed: 2},
		}}
	plan := planOf(spec, false)
	at := time.Date(2026, 12, 7, 4, 0, 0, 700_000_000, time.UTC)
	d := canary.Next(plan, canary.State{Stable: "a", Canary: "b", Since: at.Add(-time.Second)},
		canary.Observation{Revision: "b", Deployed: "a", CanaryReady: true, ChecksAt: at,
			Checks: []canary.CheckResult{{Value: 0.0123456}, {Err: errors.New("prometheus: server error 503")}}}, at.Add(time.Second))
	if len(d.State.Evaluations) != 2 {
		t.Fatalf("evaluations %+v", d.State.Evaluations)
	}
	stored := storedStatus(t, d, plan)
	want := []webappv2.CanaryCheckStatus{
		{Name: "errors", Value: "0.01235", Max: "0.05", Passed: true, Address: "http://prometheus:9090", Query: `sum(rate(x[1m]))`, EvaluatedAt: metav1.NewTime(at.Truncate(time.Second))},
		{Name: "latency", Max: "0.5", Error: "prometheus: server error 503", Address: "http://prometheus:9090", Query: `histogram_quantile(0.99, y)`, EvaluatedAt: metav1.NewTime(at.Truncate(time.Second))},
	}
	// (JSON reads times back in the local zone: compared as instants.)
	for i := range stored.Checks {
		stored.Checks[i].EvaluatedAt = metav1.NewTime(stored.Checks[i].EvaluatedAt.UTC())
	}
	if !reflect.DeepEqual(stored.Checks, want) {
		t.Errorf("status.canary.checks:\n got %+v\nwant %+v", stored.Checks, want)
	}
	if back := stateOf(&stored, plan, ""); !reflect.DeepEqual(back.Evaluations, d.State.Evaluations) {
		t.Errorf("read back from the status:\n got %+v\nwant %+v", back.Evaluations, d.State.Evaluations)
	}
}

// TestAPlanThatShrankMidCanaryRunsItsLastStep: a canary whose step the plan no longer has (steps taken out, or
// steps turned into a blue/green) runs the plan's last step from its start, its pods counted for it; one being
// promoted stays promoted.
func TestAPlanThatShrankMidCanaryRunsItsLastStep(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
	blueGreen := planOf(&webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{KeepSeconds: 60}}, false)
	for _, tc := range []struct {
		name      string
		phase     string
		step      int32
		wantStep  int
		wantSince bool
	}{
		{"at step 2 of 3, now a blue/green: its switch, from its start", "Canary", 2, 1, false},
		{"at step 1, within the plan: where it was", "Canary", 1, 1, true},
		{"promoting: still promoting", "Promoting", 2, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := stateOf(&webappv2.CanaryStatus{Phase: tc.phase, Step: tc.step, StableRevision: "a", CanaryRevision: "b", StepStartedAt: &since}, blueGreen, "b")
			if s.Step != tc.wantStep || s.Since.IsZero() == tc.wantSince {
				t.Errorf("step %d (since %v), want step %d (since kept: %v)", s.Step, s.Since, tc.wantStep, tc.wantSince)
			}
		})
	}
	if p := blueGreen.Steps[1].Pause; p != time.Minute+canary.Warmup {
		t.Errorf("the keep is %s from the switch's start, want a minute after its warm-up", p)
	}
}

// TestARetiringCanaryRoundTripsThroughTheStatus: a canary the spec left, whose pods retire, reads back from the
// status as the state that wrote it (a restart lets them go when it would have), and is written again the same way.
func TestARetiringCanaryRoundTripsThroughTheStatus(t *testing.T) {
	plan := planOf(&webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 20}, {Weight: 50}}}, false)
	at := time.Date(2026, 12, 7, 4, 0, 0, 700_000_000, time.UTC)
	d := canary.Next(plan, canary.State{Stable: "a", Canary: "b", Step: 1, Since: at.Add(-time.Minute)}, canary.Observation{Revision: "c", Deployed: "a"}, at)
	if d.State.Retiring != "b" || d.State.Canary != "c" {
		t.Fatalf("the spec left a canary at 50%%, but its pods do not retire: %+v", d.State)
	}
	stored := storedStatus(t, d, plan)
	back := stateOf(&stored, plan, "")
	if back.Retiring != "b" || !back.RetiringSince.Equal(at.Truncate(time.Second)) {
		t.Errorf("read back: retiring %q since %v, want b since %v", back.Retiring, back.RetiringSince, at.Truncate(time.Second))
	}
	if again := status.CanaryStatus(canary.Decision{State: back, Phase: d.Phase, ReplicaWeight: d.ReplicaWeight}, plan); apptest.JSON(t, again) != apptest.JSON(t, status.CanaryStatus(d, plan)) {
		t.Errorf("the status read back is written again differently:\n%s\n%s", apptest.JSON(t, again), apptest.JSON(t, status.CanaryStatus(d, plan)))
	}
	if later := canary.Next(plan, back, canary.Observation{Revision: "c", Deployed: "a"}, at.Add(canary.Retire)); later.State.Retiring != "" {
		t.Errorf("Retire after the route left them, the pods still retire: %+v", later.State)
	}
}

// TestAWayBackRoundTripsThroughTheStatus: the way back to a version kept warm, read back from the status it wrote
// (a restart, a new leader), is still the way back: promoting at all of the traffic, under an HPA's floor, and it
// ends with no window kept.
func TestAWayBackRoundTripsThroughTheStatus(t *testing.T) {
	plan := planOf(&webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 20}, {Weight: 50}}, RollbackWindowSeconds: 600, KeepPreviousWarm: true}, false)
	at := time.Date(2026, 12, 7, 4, 0, 0, 700_000_000, time.UTC)
	kept := canary.State{Stable: "b", Previous: "a", PreviousUntil: at.Add(time.Minute).Truncate(time.Second)}
	d := canary.Next(plan, kept, canary.Observation{Revision: "a", Deployed: "b", Recorded: "a", WarmReady: true, StableReplicas: 6}, at)
	if !d.State.WayBack() || d.Weight != 100 || d.State.Held != 6 {
		t.Fatalf("the spec set back to the version kept warm: %+v, want the way back at 100%% holding 6", d)
	}
	stored := storedStatus(t, d, plan)
	back := stateOf(&stored, plan, "")
	if !back.WayBack() || back.Step != len(plan.Steps) || back.Held != 6 {
		t.Errorf("read back: %+v, want the way back, promoting, holding 6", back)
	}
	if again := status.CanaryStatus(canary.Decision{State: back, Phase: d.Phase, ReplicaWeight: d.ReplicaWeight, Traffic: d.Traffic}, plan); apptest.JSON(t, again) != apptest.JSON(t, status.CanaryStatus(d, plan)) {
		t.Errorf("the status read back is written again differently:\n%s\n%s", apptest.JSON(t, again), apptest.JSON(t, status.CanaryStatus(d, plan)))
	}
	rolling := canary.Next(plan, back, canary.Observation{Revision: "a", Deployed: "a", Recorded: "a"}, at.Add(time.Second))
	if rolling.Phase != canary.PhasePromoting || rolling.Weight != 100 || rolling.ReplicaWeight != 100 {
		t.Errorf("after a restart, the way back: %+v, want promoting at 100%%", rolling)
	}
	done := canary.Next(plan, back, canary.Observation{Revision: "a", Deployed: "a", Recorded: "a", StableRolledOut: true}, at.Add(time.Second))
	done = canary.Next(plan, done.State, canary.Observation{Revision: "a", Deployed: "a", Recorded: "a", StableRolledOut: true}, at.Add(time.Second+canary.Retire))
	if done.Phase != canary.PhaseStable || done.State.Stable != "a" || done.State.Previous != "" || done.State.Held != 0 || done.Warm != "" {
		t.Errorf("the way back over: %+v, want stable a, no window, nothing held or kept", done)
	}
}

// TestRetiringCanaryObjectsAreAppliedAsTheyAre: while a canary the spec left retires, its Deployment and Service are
// built as our manager owns them (so nothing is written), whatever the spec now says (another image, other ports,
// no strategy); once it has retired, or for a Deployment of another version, they are built from the decision again.
func TestRetiringCanaryObjectsAreAppliedAsTheyAre(t *testing.T) {
	app := apptest.Exposed(webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Gateway: &webappv2.GatewayRef{Name: "public"}})
	app.Spec.Rollout.Canary = &webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{PreviewHost: "preview.shop.example.com"}}
	owned := appsv1ac.Deployment(desired.CanaryName(app), app.Namespace).WithAnnotations(map[string]string{webappv2.AnnotationRevision: "b"})
	ownedSvc := corev1ac.Service(desired.CanaryName(app), app.Namespace)
	// (A newer version's blue/green waits for them: its preview would show the retiring pods.)
	retiring := canary.Decision{State: canary.State{Stable: "a", Canary: "c", Retiring: "b"}, Phase: canary.PhaseCanary, ReplicaWeight: 100}
	for _, run := range []*canaryRun{
		{decision: retiring, retiring: owned, retiringSvc: ownedSvc},
		{decision: retiring, retiring: owned, retiringSvc: ownedSvc, retireOnly: true},
	} {
		in := inputs{canary: run}
		if dep, err := buildCanaryDeployment(app, in); err != nil || dep != owned {
			t.Errorf("retiring (retireOnly %v): the canary Deployment built as %v (%v), want it as our manager owns it", run.retireOnly, apptest.JSON(t, dep), err)
		}
		if svc, err := buildCanaryService(app, in); err != nil || svc != ownedSvc {
			t.Errorf("retiring (retireOnly %v): the canary Service built as %v (%v), want it as our manager owns it", run.retireOnly, apptest.JSON(t, svc), err)
		}
		if route, err := buildPreviewRoute(app, in); err != nil || route != nil {
			t.Errorf("retiring: a preview route %v (%v)", apptest.JSON(t, route), err)
		}
	}
	// Retired: the decision's own (none, in Stable).
	in := inputs{canary: &canaryRun{decision: canary.Decision{State: canary.State{Stable: "a"}, Phase: canary.PhaseStable}, retiring: owned, retiringSvc: ownedSvc}}
	if dep, err := buildCanaryDeployment(app, in); err != nil || dep != nil {
		t.Errorf("retired: the canary Deployment built as %v (%v), want none", apptest.JSON(t, dep), err)
	}
	if svc, err := buildCanaryService(app, in); err != nil || svc != nil {
		t.Errorf("retired: the canary Service built as %v (%v), want none", apptest.JSON(t, svc), err)
	}
	// A Deployment of another version than the one retiring is not kept.
	other := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{webappv2.AnnotationRevision: "c"}}}
	if dep, svc := retiringObjects(canaryObjects{dep: other}, "b"); dep != nil || svc != nil {
		t.Errorf("a Deployment of revision c kept for retiring revision b")
	}
}

// A canary that could not be decided leaves its objects as they are, a strategy taken out whose retiring objects
// could not be read too (never "must not exist", which would delete pods the traffic may still reach); a blue/green
// switched by the Service keeps the switch as the status last said.
func TestAnUndecidedCanaryLeavesItsObjectsAndItsSwitch(t *testing.T) {
	app := apptest.NewApp("shop", 3, 8080, "shop:2")
	unread := inputs{canary: &canaryRun{retireOnly: true, err: errors.New("the canary's Deployment could not be read")}}
	if dep, err := buildCanaryDeployment(app, unread); dep != nil || err == nil {
		t.Errorf("the retiring canary's Deployment, unread: %v %v, want left as it is (nil and the error)", dep, err)
	}
	if svc, err := buildCanaryService(app, unread); svc != nil || err == nil {
		t.Errorf("the retiring canary's Service, unread: %v %v, want left as it is (nil and the error)", svc, err)
	}
	app.Spec.Rollout.Canary = &webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{}}
	undecided := inputs{canary: &canaryRun{err: errors.New("the config hash could not be computed")}}
	for _, weight := range []int32{0, 100} {
		app.Status.Canary = &webappv2.CanaryStatus{Phase: "Canary", Step: 1, Weight: weight}
		ac, err := childOf("Service").build(app, undecided)
		if err != nil {
			t.Fatal(err)
		}
		svc := apptest.Typed[corev1.Service](t, ac)
		if got := desired.SelectsCanary(app, svc.Spec.Selector); got != (weight == 100) {
			t.Errorf("status weight %d, the canary undecided: the Service selects the canary's pods: %v", weight, got)
		}
	}
}

// A canary's objects that are to go stay while the WebApp's Service or route, as last applied, still send them
// traffic (a write that took it off failed): never deleted under traffic, whatever the decision.
func TestACanaryUnderTrafficIsNeverDeleted(t *testing.T) {
	app := apptest.NewApp("shop", 3, 8080, "shop:2")
	app.Spec.Rollout.Canary = &webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{}}
	over := &canaryRun{decision: canary.Decision{State: canary.State{Stable: "b"}, Phase: canary.PhaseStable}}
	for _, tc := range []struct {
		name    string
		in      inputs
		wantErr error
	}{
		{"the traffic has left the canary: it goes", inputs{canary: over}, nil},
		{"the Service still selects it: kept", inputs{canary: over, traffic: appliedTraffic{service: true}}, errTrafficOnCanary},
		{"the strategy taken out, the route still on it: kept", inputs{traffic: appliedTraffic{route: true}}, errTrafficOnCanary},
		{"the decision keeps them under traffic: left as they are", inputs{canary: &canaryRun{decision: canary.Decision{
			State: canary.State{Stable: "a", Retiring: "b"}, Phase: canary.PhaseStable, HeldUnderTraffic: true}}}, errTrafficOnCanary},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dep, err := buildCanaryDeployment(app, tc.in)
			if dep != nil || !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Errorf("the canary's Deployment: %v %v, want nil and %v", dep, err, tc.wantErr)
			}
			svc, err := buildCanaryService(app, tc.in)
			if svc != nil || !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Errorf("the canary's Service: %v %v, want nil and %v", svc, err, tc.wantErr)
			}
		})
	}
}

// TestPlanOfRetireSeconds: spec.rollout.canary.retireSeconds is the plan's retire; unset, the default.
func TestPlanOfRetireSeconds(t *testing.T) {
	spec := &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 10}}}
	if got := planOf(spec, false).RetireAfter(); got != canary.Retire {
		t.Errorf("unset: %s, want %s", got, canary.Retire)
	}
	spec.RetireSeconds = 45
	if got := planOf(spec, false).RetireAfter(); got != 45*time.Second {
		t.Errorf("retireSeconds 45: %s", got)
	}
}

// TestPlanOfABlueGreensSizes: a blue/green's preview is counted for previewPercent of the stable count (unset: all
// of it), its switch always for all of it; steps are counted for their traffic.
func TestPlanOfABlueGreensSizes(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec webappv2.CanarySpec
		want []int32 // each step's Pods()
	}{
		{"a blue/green", webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{PreviewSeconds: 60}}, []int32{100, 100}},
		{"a smaller preview", webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{PreviewPercent: 30}}, []int32{30, 100}},
		{"a preview of one percent", webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{PreviewPercent: 1}}, []int32{1, 100}},
		{"steps", webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 10}, {Weight: 0, MirrorPercent: 50}}}, []int32{10, 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []int32
			for _, s := range planOf(&tc.spec, false).Steps {
				got = append(got, s.Pods())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("steps counted for %v, want %v", got, tc.want)
			}
		})
	}
}

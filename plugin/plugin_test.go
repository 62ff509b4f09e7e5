package plugin

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller"
)

func TestTreeSaysEachObjectsState(t *testing.T) {
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Generation: 2},
		Status: webappv2.WebAppStatus{ObservedGeneration: 2, AvailableReplicas: 1, DesiredReplicas: 2, ReplicasSetBy: webappv2.ReplicasSetByWebApp,
			Conditions: []metav1.Condition{{Type: webappv2.ConditionReady, Status: metav1.ConditionFalse, Reason: webappv2.ReasonCrashLoopBackOff, Message: "1/2 pods crash"}}}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 3}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, ReadyReplicas: 1, UpdatedReplicas: 2, AvailableReplicas: 1}}
	crashing := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", RestartCount: 4, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}}}
	ready := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	releasedClaim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{webappv2.LabelManagedBy: webappv2.ManagedBy}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}
	cases := []struct {
		name string
		s    Snapshot
		want []string // lines of the rendered tree, in order
	}{
		{"a WebApp not reconciled yet", Snapshot{App: &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "new", Generation: 1}}},
			[]string{"WebApp new: not reconciled yet (no Ready condition), 0/0 available, generation 1 not yet observed (status is of 0)"}},
		{"a Deployment with a crashing pod", Snapshot{App: app, Children: []client.Object{dep}, Pods: map[string][]*corev1.Pod{"web": {ready, crashing}}},
			[]string{
				"WebApp web: Ready=False (CrashLoopBackOff), 1/2 available, replicas set by WebApp",
				"  Ready=False CrashLoopBackOff: 1/2 pods crash",
				"└── Deployment web: 1/2 ready, 2 updated, 1 available",
				"    ├── Pod web-0: Running, ready, 0 restarts",
				"    └── Pod web-1: Running, not ready, 4 restarts, CrashLoopBackOff:",
			}},
		{"a canary whose check waits for data, another passing", Snapshot{App: &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: webappv2.WebAppSpec{Rollout: webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 10}}}}},
			Status: webappv2.WebAppStatus{Canary: &webappv2.CanaryStatus{Phase: "Canary", CanaryRevision: "b", StableRevision: "a", Weight: 10, Checks: []webappv2.CanaryCheckStatus{
				{Name: "errors", Max: "0.01", Error: "no value since 2026-12-07T04:00:00Z, waiting up to 5m0s (onNoData: Wait)"},
				{Name: "latency", Value: "0.2", Max: "0.5", Passed: true}}}}}},
			[]string{
				"WebApp web: not reconciled yet (no Ready condition), 0/0 available",
				"└── Canary web: Canary, revision b at step 1 of 1, weight 10%, beside a, check errors: no value since 2026-12-07T04:00:00Z, waiting up to 5m0s (onNoData: Wait), check latency 0.2 ≤ 0.5",
			}},
		{"a claim released and kept", Snapshot{App: app, Others: []Other{{Object: releasedClaim, Released: true, Why: "released"}}},
			[]string{
				"WebApp web: Ready=False (CrashLoopBackOff), 1/2 available, replicas set by WebApp",
				"  Ready=False CrashLoopBackOff: 1/2 pods crash",
				"└── PersistentVolumeClaim web: Bound, 1Gi; released",
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := Render(&b, Tree(tc.s)); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(tc.want), b.String())
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("line %d = %q, want it to start with %q", i, lines[i], w)
				}
			}
		})
	}
}

func TestOwnersListsEachFieldAndTheSharedOnes(t *testing.T) {
	entry := func(manager, op, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationType(op), FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
	}
	cases := []struct {
		name       string
		entries    []metav1.ManagedFieldsEntry
		wantFields map[string][]string // field: managers, by name
		wantShared []string
		wantErr    bool
	}{
		{"ours alone", []metav1.ManagedFieldsEntry{entry(webappv2.FieldManager, "Apply", `{"f:spec":{"f:replicas":{}}}`)},
			map[string][]string{".spec.replicas": {webappv2.FieldManager}}, nil, false},
		{"a label both hold, an annotation theirs", []metav1.ManagedFieldsEntry{
			entry(webappv2.FieldManager, "Apply", `{"f:metadata":{"f:labels":{"f:a":{}}}}`),
			entry("kubectl-edit", "Update", `{"f:metadata":{"f:labels":{"f:a":{}},"f:annotations":{"f:b":{}}}}`)},
			map[string][]string{".metadata.labels.a": {"kubectl-edit", webappv2.FieldManager}, ".metadata.annotations.b": {"kubectl-edit"}},
			[]string{".metadata.labels.a"}, false},
		// The item's own entry (".") is not listed beside its fields: the fields say it.
		{"a list item by key", []metav1.ManagedFieldsEntry{entry("kubectl-set", "Update", `{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{}}}}}`)},
			map[string][]string{`.spec.containers[name="app"].image`: {"kubectl-set"}}, nil, false},
		{"a broken entry", []metav1.ManagedFieldsEntry{entry("x", "Update", `{"f:spec":`)}, nil, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &metav1.ObjectMeta{Name: "web", ManagedFields: tc.entries}
			got, err := Owners("Deployment", obj)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			have := map[string][]string{}
			for _, f := range got.Fields {
				for _, o := range f.Owners {
					have[f.Field] = append(have[f.Field], o.Manager)
				}
			}
			if len(have) != len(tc.wantFields) {
				t.Errorf("fields %v, want %v", have, tc.wantFields)
			}
			for f, managers := range tc.wantFields {
				if strings.Join(have[f], ",") != strings.Join(managers, ",") {
					t.Errorf("field %s held by %v, want %v", f, have[f], managers)
				}
			}
			if strings.Join(got.Shared, ",") != strings.Join(tc.wantShared, ",") {
				t.Errorf("shared %v, want %v", got.Shared, tc.wantShared)
			}
		})
	}
}

func TestExplainSaysWhyWithTheEvidence(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	canarySpec := &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 10, PauseSeconds: 60}, {Weight: 50, PauseSeconds: 300}},
		Checks: []webappv2.CanaryCheck{{Name: "errors", FailuresAllowed: 2}}}
	withCanary := func(st webappv2.CanaryStatus) *webappv2.WebApp {
		app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 1}}
		app.Spec.Rollout.Canary = canarySpec
		app.Status.Canary = &st
		return app
	}
	// blueGreen is a blue/green at its preview, exposed as e with preview host host.
	blueGreen := func(e *webappv2.Expose, host webappv2.Hostname) *webappv2.WebApp {
		app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 1}}
		app.Spec.Expose = e
		app.Spec.Rollout.Canary = &webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{PreviewHost: host, Gate: &webappv2.CanaryGate{}}}
		app.Status.Canary = &webappv2.CanaryStatus{Phase: "Canary", StableRevision: "a", CanaryRevision: "b"}
		return app
	}
	hpaApp := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 1},
		Status: webappv2.WebAppStatus{ReplicasSetBy: webappv2.ReplicasSetByHPA, DesiredReplicas: 5}}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 10, Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{AverageUtilization: ptr.To[int32](50)}}}}},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 3, DesiredReplicas: 5, CurrentMetrics: []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](90)}}}}}}
	cases := []struct {
		name string
		s    Snapshot
		want []string // lines the rendering holds, each somewhere
	}{
		{"a canary mid-step, in its pause", Snapshot{App: withCanary(webappv2.CanaryStatus{Phase: "Canary", StableRevision: "a", CanaryRevision: "b", Step: 1, Weight: 50,
			StepStartedAt: &metav1.Time{Time: now.Add(-100 * time.Second)}, Failures: []webappv2.CanaryCheckFailures{{Name: "errors", Count: 1}},
			Checks: []webappv2.CanaryCheckStatus{{Name: "errors", Value: "0.08", Max: "0.05", Address: "http://prom:9090", Query: "sum(rate(errors[1m]))",
				EvaluatedAt: metav1.NewTime(now.Add(-10 * time.Second))}}})},
			[]string{
				`WebApp web .status.canary.checks[name="errors"]: 0.08 against a max of 0.05, did not pass, at 2026-12-07T11:59:50Z, from http://prom:9090: sum(rate(errors[1m]))`,
				"50% of the traffic goes to revision b (web-canary), the rest to revision a (web): the canary is at step 2 of 2",
				"WebApp web .spec.rollout.canary.steps[1]: weight 50, pause 300s",
				"its pause ends in 3m20s",
				`WebApp web .status.canary.failures[name="errors"]: failed 1 times, 2 allowed`,
			}},
		{"a rollback", Snapshot{App: withCanary(webappv2.CanaryStatus{Phase: "RolledBack", StableRevision: "a", FailedRevision: "b", Reason: webappv2.ReasonCrashLoopBackOff, Message: "1/1 pods crash",
			Checks: []webappv2.CanaryCheckStatus{{Name: "errors", Max: "0.05", Error: "no value", Address: "http://prom:9090", Query: "q", EvaluatedAt: metav1.NewTime(now)}}})},
			[]string{
				`WebApp web .status.canary.checks[name="errors"]: no value against a max of 0.05, did not pass (no value), at 2026-12-07T12:00:00Z, from http://prom:9090: q`,
				"All the traffic goes to revision a (web): revision b was rolled back (CrashLoopBackOff)",
				"WebApp web .status.canary.reason / message: CrashLoopBackOff: 1/1 pods crash",
			}},
		{"a blue/green's preview behind an Ingress", Snapshot{App: blueGreen(&webappv2.Expose{Hosts: []webappv2.Hostname{"shop.test"}, Ingress: &webappv2.IngressRef{ClassName: "traefik"}}, "preview.shop.test")},
			[]string{
				"revision b (web-canary) is previewed at full size with none of the traffic",
				"WebApp web .spec.rollout.canary.blueGreen.previewHost: preview.shop.test: the preview, through Ingress web-canary (class traefik) to Service web-canary alone",
			}},
		{"a blue/green's preview behind a Gateway", Snapshot{App: blueGreen(&webappv2.Expose{Hosts: []webappv2.Hostname{"shop.test"}, Gateway: &webappv2.GatewayRef{Name: "public"}}, "preview.shop.test")},
			[]string{"WebApp web .spec.rollout.canary.blueGreen.previewHost: preview.shop.test: the preview, through HTTPRoute web-canary on Gateway public to Service web-canary alone"}},
		{"a blue/green's keep, its preview's smoke test kept", Snapshot{App: func() *webappv2.WebApp {
			app := blueGreen(nil, "")
			app.Spec.Rollout.Canary.Checks = []webappv2.CanaryCheck{{Name: "smoke", Max: "0", During: webappv2.DuringPreview}, {Name: "errors", Max: "0.01"}}
			app.Status.Canary.Step, app.Status.Canary.Weight = 1, 100
			app.Status.Canary.Checks = []webappv2.CanaryCheckStatus{{Name: "smoke", Value: "0", Max: "0", Passed: true, Address: "http://smoke", EvaluatedAt: metav1.NewTime(now)},
				{Name: "errors", Value: "0", Max: "0.01", Passed: true, Address: "http://prom", Query: "q", EvaluatedAt: metav1.NewTime(now)}}
			return app
		}()},
			[]string{
				`WebApp web .status.canary.checks[name="smoke"]: 0 against a max of 0, passed, at 2026-12-07T12:00:00Z, from http://smoke (it gates the preview alone: during Preview)`,
				`WebApp web .status.canary.checks[name="errors"]: 0 against a max of 0.01, passed, at 2026-12-07T12:00:00Z, from http://prom: q`,
			}},
		{"a smaller preview", Snapshot{App: func() *webappv2.WebApp {
			app := blueGreen(nil, "")
			app.Spec.Rollout.Canary.BlueGreen.PreviewPercent = 25
			return app
		}()},
			[]string{
				"revision b (web-canary) is previewed at 25% of the stable count with none of the traffic",
				"WebApp web .spec.rollout.canary.blueGreen.previewSeconds: 0: the preview, at 25% of the stable count with no traffic",
			}},
		{"past a smaller preview, before the switch", Snapshot{App: func() *webappv2.WebApp {
			app := blueGreen(nil, "")
			app.Spec.Rollout.Canary.BlueGreen.PreviewPercent = 25
			app.Status.Canary.Step = 1
			return app
		}()},
			[]string{"revision b (web-canary) runs at full size for the blue/green switch, which comes once every one of its pods is ready (behind a route, 5s later); revision a (web) serves all the traffic until then"}},
		{"a blue/green's preview with no host", Snapshot{App: blueGreen(nil, "")},
			[]string{"Service web-canary .spec.selector: the preview: the new version's pods alone (no preview host: smoke tests go to this Service)"}},
		{"a count the HPA sets", Snapshot{App: hpaApp, Children: []client.Object{hpa}},
			[]string{
				"The count is 5, set by HorizontalPodAutoscaler",
				"HorizontalPodAutoscaler web .status.currentReplicas / desiredReplicas: 3 / 5",
				"HorizontalPodAutoscaler web .status.currentMetrics[0]: cpu at 90% against a target of 50%",
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := RenderExplain(&b, Explain(tc.s, now)); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("explain does not say %q:\n%s", w, b.String())
				}
			}
		})
	}
}

// An object of a child's name that the WebApp does not control is either one the operator released (our label, no
// controller) or someone else's: each said in words, with what follows.
func TestObjectsNotTheWebAppsSayWhatTheyAre(t *testing.T) {
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "app-uid"}}
	ours := map[string]string{webappv2.LabelManagedBy: webappv2.ManagedBy, webappv2.LabelInstance: app.Name}
	cases := []struct {
		name     string
		obj      client.Object
		released bool
		why      string
	}{
		{"a claim released", &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: ours}}, true,
			"released by the WebApp and kept with its data"},
		{"a Service of an Orphan deletion", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: ours}}, true,
			"released by the WebApp (no owner reference to it)"},
		{"someone else's claim", &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, false,
			"not the WebApp's: it is not managed by webapp-operator"},
		{"a Service another controller controls", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: ours,
			OwnerReferences: []metav1.OwnerReference{{Kind: "Thing", Name: "t", UID: "other", Controller: ptr.To(true)}}}}, false,
			"not the WebApp's: it is controlled by Thing t"},
		{"a Deployment another WebApp's Orphan deletion released", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: app.Name + "-canary",
			Labels: map[string]string{webappv2.LabelManagedBy: webappv2.ManagedBy, webappv2.LabelInstance: app.Name + "-canary"}}}, false,
			`not the WebApp's: it was released by WebApp "` + app.Name + `-canary"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := released(tc.obj, app); got != tc.released {
				t.Errorf("released = %v, want %v", got, tc.released)
			}
			if got := notOwnWhy(tc.obj, app); !strings.HasPrefix(got, tc.why) {
				t.Errorf("why = %q, want it to start with %q", got, tc.why)
			}
		})
	}
}

// A person's action is the annotation's value for where the canary is, or why it would act on nothing.
func TestActionValueSaysWhatActsOrWhyNot(t *testing.T) {
	at := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	app := func(phase string, step int32) *webappv2.WebApp {
		a := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
		a.Spec.Rollout.Canary = &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 10}, {Weight: 50}}}
		a.Status.Canary = &webappv2.CanaryStatus{Phase: phase, StableRevision: "a", CanaryRevision: "b", Step: step}
		if phase == "RolledBack" {
			a.Status.Canary.CanaryRevision, a.Status.Canary.FailedRevision = "", "b"
		}
		return a
	}
	cases := []struct {
		name, verb   string
		app          *webappv2.WebApp
		full         bool
		specRevision string
		want, err    string
	}{
		{name: "promote the step", verb: "promote", app: app("Canary", 1), want: "promote b/1 at 2026-12-07T05:00:00Z"},
		{name: "promote all the way", verb: "promote", app: app("Canary", 0), full: true, want: "promote b/full at 2026-12-07T05:00:00Z"},
		{name: "promote with no canary", verb: "promote", app: app("Stable", 0), err: "no canary to promote: it is Stable"},
		{name: "abort", verb: "abort", app: app("Canary", 0), want: "abort b at 2026-12-07T05:00:00Z"},
		{name: "abort while promoting: the stable Deployment goes back", verb: "abort", app: app("Promoting", 2), want: "abort b at 2026-12-07T05:00:00Z"},
		{name: "abort on the way back to a version kept warm: nothing to go back to", verb: "abort", app: func() *webappv2.WebApp {
			a := app("Promoting", 2)
			a.Status.Canary.Reason = webappv2.ReasonRolledBackToPrevious
			return a
		}(), err: "is rolling back to revision b, the version its spec was set back to: there is no canary to abort"},
		{name: "retry", verb: "retry", app: app("RolledBack", 0), specRevision: "b", want: "retry b at 2026-12-07T05:00:00Z"},
		{name: "retry when the spec moved on", verb: "retry", app: app("RolledBack", 0), specRevision: "c", err: "no longer asks for the rolled-back revision b"},
		{name: "retry with nothing rolled back", verb: "retry", app: app("Canary", 0), err: "no rolled-back version to retry"},
		{name: "no strategy", verb: "promote", app: &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, err: "no canary strategy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := actionValue(tc.app, tc.verb, tc.full, tc.specRevision, at)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("err %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("%q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestCanaryPlanSaysWhatTheStepMachineDoes: plan's words for a change, from the WebApp's status.canary, follow the
// step machine's cases: a canary under way goes on, or is left (retiring after the route when it sent it traffic,
// at once without one); the version before within the rollback window comes back at once; a rolled-back version
// stays so; another version starts a canary or a preview.
func TestCanaryPlanSaysWhatTheStepMachineDoes(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	steps := &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 10}, {Weight: 50}}, RollbackWindowSeconds: 600}
	routed := &webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Gateway: &webappv2.GatewayRef{Name: "public"}}
	app := func(strategy *webappv2.CanarySpec, expose *webappv2.Expose, c *webappv2.CanaryStatus) *webappv2.WebApp {
		return &webappv2.WebApp{Spec: webappv2.WebAppSpec{Expose: expose, Rollout: webappv2.RolloutSpec{Canary: strategy}}, Status: webappv2.WebAppStatus{Canary: c}}
	}
	started := metav1.NewTime(now.Add(-time.Minute))
	atStep2 := &webappv2.CanaryStatus{Phase: "Canary", StableRevision: "a", CanaryRevision: "b", Step: 1, Weight: 50, StepStartedAt: &started}
	notReady := &webappv2.CanaryStatus{Phase: "Canary", StableRevision: "a", CanaryRevision: "b"}
	switched := &webappv2.CanaryStatus{Phase: "Canary", StableRevision: "a", CanaryRevision: "b", Step: 1, Weight: 100, StepStartedAt: &started}
	promoted := &webappv2.CanaryStatus{Phase: "Stable", StableRevision: "b", PreviousRevision: "a", PreviousUntil: &metav1.Time{Time: now.Add(5 * time.Minute)}}
	for _, tc := range []struct {
		name     string
		cur      *webappv2.WebApp
		next     *webappv2.WebApp
		revision string
		want     string
	}{
		{"the first version", nil, app(steps, nil, nil), "a", "revision a is the first: it becomes stable without a canary"},
		{"the canary's own version again", app(steps, routed, atStep2), app(steps, routed, nil), "b", "the canary of revision b goes on where it is (step 2 of 2)"},
		{"set back mid-canary behind a route", app(steps, routed, atStep2), app(steps, routed, nil), "a",
			"the spec is set back to revision a, which serves: the canary of revision b is left: the route sends it nothing from then on, and its pods go 10s later, answering the requests already on their way"},
		{"set back before the route sent the canary anything", app(steps, routed, notReady), app(steps, routed, nil), "a",
			"the spec is set back to revision a, which serves: the canary of revision b is left: the route has sent it nothing yet, and its pods go at once"},
		{"a newer version mid-canary without a route", app(steps, nil, atStep2), app(steps, nil, nil), "c",
			"the canary of revision b is left: its pods go at once, leaving the one Service as any pod going does; then a canary of revision c starts beside revision a, at 10% of the traffic (step 1 of 2)"},
		{"the strategy taken out mid-canary", app(steps, routed, atStep2), app(nil, routed, nil), "b",
			"spec.rollout.canary is taken out: the Deployment runs revision b; the canary of revision b is left: the route sends it nothing from then on, and its pods go 10s later, answering the requests already on their way"},
		{"a blue/green's strategy taken out while the Service is switched", app(&webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{}}, nil, switched), app(nil, nil, nil), "b",
			"spec.rollout.canary is taken out: the Deployment runs revision b; the canary of revision b is left: the Service's switch sends it nothing from then on, and its pods go 10s later, answering the requests already on their way"},
		{"the version before, within the window", app(steps, routed, promoted), app(steps, routed, nil), "a",
			"revision a is the version before the last promotion, within its rollback window (until 2026-12-07T12:05:00Z): it is stable again at once, the Deployment rolling back to it without a canary"},
		{"the version before, kept warm", app(steps, routed, promoted), app(&webappv2.CanarySpec{Steps: steps.Steps, RollbackWindowSeconds: 600, KeepPreviousWarm: true}, routed, nil), "a",
			"revision a is the version before the last promotion, within its rollback window (until 2026-12-07T12:05:00Z): it is stable again at once; its pods kept warm in -canary, once every one is ready, get all the traffic at once while the Deployment rolls back to it (otherwise the Deployment rolls back without a canary)"},
		{"the rolled-back version again", app(steps, nil, &webappv2.CanaryStatus{Phase: "RolledBack", StableRevision: "a", FailedRevision: "b"}), app(steps, nil, nil), "b",
			"revision b was rolled back: applying it again does not start it again (kubectl webapp retry does)"},
		{"a blue/green's next version", app(steps, routed, promoted), app(&webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{}}, routed, nil), "c",
			"revision c starts at full size beside revision b, previewed with none of the traffic until the blue/green switch"},
		{"a smaller preview's next version", app(steps, routed, promoted), app(&webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{PreviewPercent: 50}}, routed, nil), "c",
			"revision c starts at 50% of the stable count beside revision b, previewed with none of the traffic until the blue/green switch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := canaryPlan(tc.cur, tc.next, controller.PlannedChildren{Revision: tc.revision}, now); got != tc.want {
				t.Errorf("canaryPlan:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

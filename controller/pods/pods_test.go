package pods

import (
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/internal/apptest"
)

func restarted(last *corev1.ContainerStateTerminated, ready bool) corev1.Pod {
	return corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: ready, RestartCount: 3,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, LastTerminationState: corev1.ContainerState{Terminated: last}}}}}
}

// unready runs but is not ready, as pod uid.
func unready(uid string) corev1.Pod {
	p := apptest.Running()
	p.UID = types.UID(uid)
	return p
}

func TestPodTrouble(t *testing.T) {
	exit1 := &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}
	oom := &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}
	deleted := apptest.Running()
	deleted.DeletionTimestamp = &metav1.Time{}
	probes := ProbeFailures{
		"a": "Readiness probe failed: HTTP probe failed with statuscode: 500",
		"b": "Readiness probe failed: Get \"http://10.244.0.9:8080/healthz\": dial tcp 10.244.0.9:8080: connect: connection refused",
		"c": "Readiness probe failed: Get \"http://10.244.0.7:8080/healthz\": dial tcp 10.244.0.7:8080: connect: connection refused",
	}
	readyWithProbe := apptest.Running()
	readyWithProbe.UID = "a"
	readyWithProbe.Status.ContainerStatuses[0].Ready = true
	cases := []struct {
		name        string
		pods        []corev1.Pod
		reason, msg string
	}{
		{"no pods", nil, "", ""},
		{"all running", []corev1.Pod{apptest.Running(), apptest.Running()}, "", ""},
		{"crash loop", []corev1.Pod{apptest.Waiting("CrashLoopBackOff", "x", exit1), apptest.Waiting("CrashLoopBackOff", "x", exit1), apptest.Running()},
			webappv2.ReasonCrashLoopBackOff, "2/3 pods CrashLoopBackOff: container app exited with code 1"},
		{"out of memory", []corev1.Pod{apptest.Waiting("CrashLoopBackOff", "x", oom)}, webappv2.ReasonCrashLoopBackOff, "1/1 pods CrashLoopBackOff: container app was OOMKilled (exit code 137)"},
		{"pull failing, both phases alike", []corev1.Pod{apptest.Waiting("ErrImagePull", "nginx:nope", nil), apptest.Waiting("ImagePullBackOff", "nginx:nope", nil)},
			webappv2.ReasonImagePullBackOff, `2/2 pods cannot pull image "nginx:nope"`},
		{"pull before crash", []corev1.Pod{apptest.Waiting("CrashLoopBackOff", "old", exit1), apptest.Waiting("ImagePullBackOff", "new", nil)},
			webappv2.ReasonImagePullBackOff, `1/2 pods cannot pull image "new"`},
		{"unschedulable", []corev1.Pod{apptest.Unschedulable("0/1 nodes are available: 1 Insufficient cpu."), apptest.Running()},
			webappv2.ReasonUnschedulable, "1/2 pods unschedulable: 0/1 nodes are available: 1 Insufficient cpu."},
		{"a pod being deleted does not count", []corev1.Pod{deleted, apptest.Waiting("CrashLoopBackOff", "x", exit1)}, webappv2.ReasonCrashLoopBackOff, "1/1 pods CrashLoopBackOff: container app exited with code 1"},
		{"starting is no trouble", []corev1.Pod{apptest.Waiting("ContainerCreating", "x", nil)}, "", ""},
		{"between two crashes it still counts", []corev1.Pod{apptest.Waiting("CrashLoopBackOff", "x", exit1), restarted(exit1, false)},
			webappv2.ReasonCrashLoopBackOff, "2/2 pods CrashLoopBackOff: container app exited with code 1"},
		{"restarted once and ready is fine", []corev1.Pod{restarted(exit1, true)}, "", ""},
		{"readiness probe failing", []corev1.Pod{unready("a"), unready("a"), readyWithProbe}, webappv2.ReasonReadinessFailing,
			"2/3 pods not ready: Readiness probe failed: HTTP probe failed with statuscode: 500"},
		{"each pod's words differ: all count, one's words are said", []corev1.Pod{unready("b"), unready("c")}, webappv2.ReasonReadinessFailing,
			"2/2 pods not ready: " + probes["c"]},
		{"unready without a failed probe is still starting", []corev1.Pod{unready("z")}, "", ""},
		{"a failed probe of a ready pod is history", []corev1.Pod{readyWithProbe}, "", ""},
		{"unschedulable before readiness", []corev1.Pod{unready("a"), apptest.Unschedulable("0/1 nodes")}, webappv2.ReasonUnschedulable, "1/2 pods unschedulable: 0/1 nodes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reason, msg := Trouble(ptrs(tc.pods), probes)
			if reason != tc.reason || msg != tc.msg {
				t.Errorf("got %q %q, want %q %q", reason, msg, tc.reason, tc.msg)
			}
		})
	}
}

// TestSlimPodKeepsOnlyTheCanaryRevisionLabel: of a pod's labels the cache keeps the one the canary's analysis
// reads; the watch's selector is applied by the server.
func TestSlimPodKeepsOnlyTheCanaryRevisionLabel(t *testing.T) {
	for _, tc := range []struct {
		labels, want map[string]string
	}{
		{labels: map[string]string{webappv2.LabelManagedBy: webappv2.ManagedBy, "app.kubernetes.io/name": "web", "pod-template-hash": "abc"}},
		{labels: map[string]string{webappv2.LabelManagedBy: webappv2.ManagedBy, webappv2.LabelCanaryRevision: "7"}, want: map[string]string{webappv2.LabelCanaryRevision: "7"}},
		{labels: map[string]string{webappv2.LabelCanaryRevision: ""}, want: map[string]string{webappv2.LabelCanaryRevision: ""}},
		{},
	} {
		slim, _ := Slim(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: tc.labels}})
		if got := slim.(*Pod).Labels; !maps.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("slimPod of labels %v kept %v, want %v", tc.labels, got, tc.want)
		}
	}
}

// TestSlimPodKeepsWhatPodTroubleReads: the cache's transform keeps every field Trouble reads, so the trouble of
// a slim pod is the trouble of the pod.
func TestSlimPodKeepsWhatPodTroubleReads(t *testing.T) {
	probes := ProbeFailures{"u": "Readiness probe failed: HTTP probe failed with statuscode: 500"}
	started := metav1.NewTime(time.Unix(1796140000, 0))
	notReady := unready("u")
	notReady.Status.ContainerStatuses[0].State.Running.StartedAt = started
	for _, p := range []corev1.Pod{apptest.Waiting("CrashLoopBackOff", "x", &corev1.ContainerStateTerminated{ExitCode: 3}), apptest.Waiting("ErrImagePull", "y", nil), apptest.Unschedulable("no"), notReady} {
		p.Spec.Containers = []corev1.Container{{Name: "app", Image: "x", Env: []corev1.EnvVar{{Name: "BIG", Value: "..."}}}}
		slim, _ := Slim(p.DeepCopy())
		sp := slim.(*Pod)
		r1, m1 := Trouble([]*Pod{AsCached(&p)}, probes)
		r2, m2 := Trouble([]*Pod{sp}, probes)
		if r1 != r2 || m1 != m2 || AwaitsReadiness(AsCached(&p)) != AwaitsReadiness(sp) || !RunningSince(AsCached(&p)).Equal(RunningSince(sp)) {
			t.Errorf("%q %q became %q %q", r1, m1, r2, m2)
		}
	}
}

func ptrs(pods []corev1.Pod) []*Pod {
	out := make([]*Pod, len(pods))
	for i := range pods {
		out[i] = AsCached(&pods[i])
	}
	return out
}

func TestLastProbeFailure(t *testing.T) {
	started := time.Date(2026, 12, 1, 21, 44, 54, 700_000_000, time.UTC)
	at := func(sec int) metav1.Time {
		return metav1.NewTime(started.Truncate(time.Second).Add(time.Duration(sec) * time.Second))
	}
	event := func(msg string, last metav1.Time) corev1.Event {
		return corev1.Event{Message: msg, LastTimestamp: last}
	}
	const refused = `Readiness probe failed: Get "http://10.244.0.53:8080/healthz": dial tcp 10.244.0.53:8080: connect: connection refused`
	const status500 = "Readiness probe failed: HTTP probe failed with statuscode: 500"
	cases := []struct {
		name   string
		events []corev1.Event
		want   string
	}{
		{"none", nil, ""},
		{"one", []corev1.Event{event(status500, at(1))}, status500},
		// The app did not listen yet at the first probe; the next probe's words are what it says now.
		{"the words changed once it listened", []corev1.Event{event(refused, at(1)), event(status500, at(11))}, status500},
		{"in any order", []corev1.Event{event(status500, at(11)), event(refused, at(1))}, status500},
		{"a series", []corev1.Event{event(refused, at(5)), {Message: status500, Series: &corev1.EventSeries{LastObservedTime: metav1.NewMicroTime(at(9).Time)}}}, status500},
		{"aggregated", []corev1.Event{event("(combined from similar events): "+status500, at(2))}, status500},
		{"before the container started", []corev1.Event{event(refused, at(-30))}, ""},
		{"in the second it started", []corev1.Event{event(refused, at(0))}, refused},
		{"liveness is the crash loop's", []corev1.Event{event("Liveness probe failed: HTTP probe failed with statuscode: 500", at(3))}, ""},
		{"startup", []corev1.Event{event("Startup probe failed: timeout", at(3))}, "Startup probe failed: timeout"},
		{"cut to the limit", []corev1.Event{event("Readiness probe failed: "+strings.Repeat("é", maxProbeWords), at(3))}, TruncateTo("Readiness probe failed: "+strings.Repeat("é", maxProbeWords), maxProbeWords)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := LastProbeFailure(tc.events, started); got != tc.want {
				t.Errorf("lastProbeFailure = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestProbeRecheckAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 21, 45, 0, 0, time.UTC)
	startedAgo := func(d time.Duration) *Pod {
		p := apptest.Running()
		p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(now.Add(-d))
		return AsCached(&p)
	}
	cases := []struct {
		name    string
		unready []*Pod
		want    time.Duration
	}{
		{"no unready pod", nil, 0},
		// Its words may still change (or its first probe is still to fail): look again soon.
		{"started a moment ago", []*Pod{startedAgo(3 * time.Second)}, probeRecheck},
		{"started just inside the window", []*Pod{startedAgo(probeRecheckFor - time.Second)}, probeRecheck},
		// Past it, a pod that stays unready waits for a change of something watched.
		{"started long ago", []*Pod{startedAgo(probeRecheckFor)}, 0},
		{"one of several started recently", []*Pod{startedAgo(time.Hour), startedAgo(10 * time.Second)}, probeRecheck},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ProbeRecheckAfter(tc.unready, now); got != tc.want {
				t.Errorf("probeRecheckAfter = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCachedPodCopies: a copy of a cached pod shares nothing with it (the informer hands copies to readers that
// ask), and the typed variant a cache of some namespaces keeps reads back as the same cached pod.
func TestCachedPodCopies(t *testing.T) {
	p := unready("u")
	p.ObjectMeta = metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u", Labels: map[string]string{webappv2.LabelCanaryRevision: "1"},
		OwnerReferences: []metav1.OwnerReference{apptest.ControllerRef("ReplicaSet", "web-1", "uid-web-1")}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	slim, _ := Slim(p.DeepCopy())
	orig := slim.(*Pod)
	cp, ok := orig.DeepCopyObject().(*Pod)
	if !ok || !equality.Semantic.DeepEqual(cp, orig) {
		t.Fatalf("DeepCopyObject = %+v, want %+v", cp, orig)
	}
	cp.Labels[webappv2.LabelCanaryRevision] = "2"
	cp.OwnerReferences[0].Name = "x"
	cp.Status.Conditions[0].Reason = "x"
	cp.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(time.Unix(1, 0))
	if orig.Labels[webappv2.LabelCanaryRevision] != "1" || orig.OwnerReferences[0].Name != "web-1" || orig.Status.Conditions[0].Reason != "" ||
		!orig.Status.ContainerStatuses[0].State.Running.StartedAt.IsZero() {
		t.Errorf("changing the copy changed the original: %+v", orig)
	}
	typed, _ := SlimTyped(p.DeepCopy())
	if got := AsCached(typed.(*corev1.Pod)); !equality.Semantic.DeepEqual(got, orig) {
		t.Errorf("slimPodTyped read back as %+v, want %+v", got, orig)
	}
	// What is not a pod passes through (a tombstone, an object already slimmed).
	if o, _ := Slim(orig); o != any(orig) {
		t.Errorf("slimPod of a cached pod made %+v", o)
	}
}

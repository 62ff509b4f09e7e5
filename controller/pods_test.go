package controller

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
)

func waiting(reason, image string, last *corev1.ContainerStateTerminated) corev1.Pod {
	return corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		Name: "app", Image: image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "words that change " + reason}},
		LastTerminationState: corev1.ContainerState{Terminated: last},
	}}}}
}

func running() corev1.Pod {
	return corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
}

func restarted(last *corev1.ContainerStateTerminated, ready bool) corev1.Pod {
	return corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: ready, RestartCount: 3,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, LastTerminationState: corev1.ContainerState{Terminated: last}}}}}
}

// unready runs but is not ready, as pod uid.
func unready(uid string) corev1.Pod {
	p := running()
	p.UID = types.UID(uid)
	return p
}

func unschedulable(msg string) corev1.Pod {
	return corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}}}}
}

func TestPodTrouble(t *testing.T) {
	exit1 := &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}
	oom := &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}
	deleted := running()
	deleted.DeletionTimestamp = &metav1.Time{}
	probes := probeFailures{
		"a": "Readiness probe failed: HTTP probe failed with statuscode: 500",
		"b": "Readiness probe failed: Get \"http://10.244.0.9:8080/healthz\": dial tcp 10.244.0.9:8080: connect: connection refused",
		"c": "Readiness probe failed: Get \"http://10.244.0.7:8080/healthz\": dial tcp 10.244.0.7:8080: connect: connection refused",
	}
	readyWithProbe := running()
	readyWithProbe.UID = "a"
	readyWithProbe.Status.ContainerStatuses[0].Ready = true
	cases := []struct {
		name        string
		pods        []corev1.Pod
		reason, msg string
	}{
		{"no pods", nil, "", ""},
		{"all running", []corev1.Pod{running(), running()}, "", ""},
		{"crash loop", []corev1.Pod{waiting("CrashLoopBackOff", "x", exit1), waiting("CrashLoopBackOff", "x", exit1), running()},
			webappv2.ReasonCrashLoopBackOff, "2/3 pods CrashLoopBackOff: container app exited with code 1"},
		{"out of memory", []corev1.Pod{waiting("CrashLoopBackOff", "x", oom)}, webappv2.ReasonCrashLoopBackOff, "1/1 pods CrashLoopBackOff: container app was OOMKilled (exit code 137)"},
		{"pull failing, both phases alike", []corev1.Pod{waiting("ErrImagePull", "nginx:nope", nil), waiting("ImagePullBackOff", "nginx:nope", nil)},
			webappv2.ReasonImagePullBackOff, `2/2 pods cannot pull image "nginx:nope"`},
		{"pull before crash", []corev1.Pod{waiting("CrashLoopBackOff", "old", exit1), waiting("ImagePullBackOff", "new", nil)},
			webappv2.ReasonImagePullBackOff, `1/2 pods cannot pull image "new"`},
		{"unschedulable", []corev1.Pod{unschedulable("0/1 nodes are available: 1 Insufficient cpu."), running()},
			webappv2.ReasonUnschedulable, "1/2 pods unschedulable: 0/1 nodes are available: 1 Insufficient cpu."},
		{"a pod being deleted does not count", []corev1.Pod{deleted, waiting("CrashLoopBackOff", "x", exit1)}, webappv2.ReasonCrashLoopBackOff, "1/1 pods CrashLoopBackOff: container app exited with code 1"},
		{"starting is no trouble", []corev1.Pod{waiting("ContainerCreating", "x", nil)}, "", ""},
		{"between two crashes it still counts", []corev1.Pod{waiting("CrashLoopBackOff", "x", exit1), restarted(exit1, false)},
			webappv2.ReasonCrashLoopBackOff, "2/2 pods CrashLoopBackOff: container app exited with code 1"},
		{"restarted once and ready is fine", []corev1.Pod{restarted(exit1, true)}, "", ""},
		{"readiness probe failing", []corev1.Pod{unready("a"), unready("a"), readyWithProbe}, webappv2.ReasonReadinessFailing,
			"2/3 pods not ready: Readiness probe failed: HTTP probe failed with statuscode: 500"},
		{"each pod's words differ: all count, one's words are said", []corev1.Pod{unready("b"), unready("c")}, webappv2.ReasonReadinessFailing,
			"2/2 pods not ready: " + probes["c"]},
		{"unready without a failed probe is still starting", []corev1.Pod{unready("z")}, "", ""},
		{"a failed probe of a ready pod is history", []corev1.Pod{readyWithProbe}, "", ""},
		{"unschedulable before readiness", []corev1.Pod{unready("a"), unschedulable("0/1 nodes")}, webappv2.ReasonUnschedulable, "1/2 pods unschedulable: 0/1 nodes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reason, msg := podTrouble(ptrs(tc.pods), probes)
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
		slim, _ := slimPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: tc.labels}})
		if got := slim.(*cachedPod).Labels; !maps.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("slimPod of labels %v kept %v, want %v", tc.labels, got, tc.want)
		}
	}
}

// TestSlimPodKeepsWhatPodTroubleReads: the cache's transform keeps every field podTrouble reads, so the trouble of
// a slim pod is the trouble of the pod.
func TestSlimPodKeepsWhatPodTroubleReads(t *testing.T) {
	probes := probeFailures{"u": "Readiness probe failed: HTTP probe failed with statuscode: 500"}
	started := metav1.NewTime(time.Unix(1796140000, 0))
	notReady := unready("u")
	notReady.Status.ContainerStatuses[0].State.Running.StartedAt = started
	for _, p := range []corev1.Pod{waiting("CrashLoopBackOff", "x", &corev1.ContainerStateTerminated{ExitCode: 3}), waiting("ErrImagePull", "y", nil), unschedulable("no"), notReady} {
		p.Spec.Containers = []corev1.Container{{Name: "app", Image: "x", Env: []corev1.EnvVar{{Name: "BIG", Value: "..."}}}}
		slim, _ := slimPod(p.DeepCopy())
		sp := slim.(*cachedPod)
		r1, m1 := podTrouble([]*cachedPod{asCached(&p)}, probes)
		r2, m2 := podTrouble([]*cachedPod{sp}, probes)
		if r1 != r2 || m1 != m2 || awaitsReadiness(asCached(&p)) != awaitsReadiness(sp) || !runningSince(asCached(&p)).Equal(runningSince(sp)) {
			t.Errorf("%q %q became %q %q", r1, m1, r2, m2)
		}
	}
}

func ptrs(pods []corev1.Pod) []*cachedPod {
	out := make([]*cachedPod, len(pods))
	for i := range pods {
		out[i] = asCached(&pods[i])
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
		{"cut to the limit", []corev1.Event{event("Readiness probe failed: "+strings.Repeat("é", maxProbeWords), at(3))}, truncateTo("Readiness probe failed: "+strings.Repeat("é", maxProbeWords), maxProbeWords)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := lastProbeFailure(tc.events, started); got != tc.want {
				t.Errorf("lastProbeFailure = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestProbeRecheckAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 21, 45, 0, 0, time.UTC)
	startedAgo := func(d time.Duration) *cachedPod {
		p := running()
		p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(now.Add(-d))
		return asCached(&p)
	}
	cases := []struct {
		name    string
		unready []*cachedPod
		want    time.Duration
	}{
		{"no unready pod", nil, 0},
		// Its words may still change (or its first probe is still to fail): look again soon.
		{"started a moment ago", []*cachedPod{startedAgo(3 * time.Second)}, probeRecheck},
		{"started just inside the window", []*cachedPod{startedAgo(probeRecheckFor - time.Second)}, probeRecheck},
		// Past it, a pod that stays unready waits for a change of something watched.
		{"started long ago", []*cachedPod{startedAgo(probeRecheckFor)}, 0},
		{"one of several started recently", []*cachedPod{startedAgo(time.Hour), startedAgo(10 * time.Second)}, probeRecheck},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := probeRecheckAfter(tc.unready, now); got != tc.want {
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
		OwnerReferences: []metav1.OwnerReference{controllerRef("ReplicaSet", "web-1", "uid-web-1")}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	slim, _ := slimPod(p.DeepCopy())
	orig := slim.(*cachedPod)
	cp, ok := orig.DeepCopyObject().(*cachedPod)
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
	typed, _ := slimPodTyped(p.DeepCopy())
	if got := asCached(typed.(*corev1.Pod)); !equality.Semantic.DeepEqual(got, orig) {
		t.Errorf("slimPodTyped read back as %+v, want %+v", got, orig)
	}
	// What is not a pod passes through (a tombstone, an object already slimmed).
	if o, _ := slimPod(orig); o != any(orig) {
		t.Errorf("slimPod of a cached pod made %+v", o)
	}
}

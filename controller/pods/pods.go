// Package pods is what a WebApp's pods say: the trouble that keeps them from running (an image that cannot be
// pulled, a crash loop, a pod the scheduler cannot place, a failing probe), which pods are the WebApp's (made by its
// Deployment's ReplicaSets, not merely labelled like them), and the slim form the pod watch keeps them in. Pure
// functions of pods and events: the reconciler's pod watch (controller/podwatch.go) and its reads
// (controller/observe.go, controller/observe_pods.go) hand them in, and the status (controller/status) says what
// they found. The lint config refuses a client, cache, HTTP or file import here.
package pods

import (
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	webappv2 "github.com/example/webapp-operator/apis/v2"
)

// Trouble says what keeps the WebApp's pods from running, from the pods as the cache keeps them (Slim) and
// the failed probes of those that run unready: an image that cannot be pulled, a crash loop, a pod the scheduler
// cannot place, a failing readiness probe; "" when none of these. The most telling trouble wins (pull before crash
// before scheduling before readiness), with how many of the pods have it. The message holds only what stays the
// same while the trouble does (never a restart count or a back-off's wait), so a crash-looping pod's every
// restart costs no status write.
func Trouble(pods []*Pod, probes ProbeFailures) (reason, msg string) {
	type finding struct {
		reason, detail string
		n              int
	}
	var found []finding
	add := func(reason, detail string) {
		for i := range found {
			if found[i].reason == reason && found[i].detail == detail {
				found[i].n++
				return
			}
		}
		found = append(found, finding{reason, detail, 1})
	}
	total := 0
	var unready []string // the failed probes' words, one per pod
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		total++
		if reason, detail := OneTrouble(p); reason != "" {
			add(reason, detail)
		} else if probes[p.UID] != "" && AwaitsReadiness(p) {
			unready = append(unready, probes[p.UID])
		}
	}
	if len(unready) > 0 {
		// The words differ between pods (an address in them): every such pod counts, and one's words are said.
		found = append(found, finding{webappv2.ReasonReadinessFailing, "not ready: " + slices.Min(unready), len(unready)})
	}
	rank := map[string]int{webappv2.ReasonImagePullBackOff: 0, webappv2.ReasonCrashLoopBackOff: 1, webappv2.ReasonUnschedulable: 2, webappv2.ReasonReadinessFailing: 3}
	slices.SortStableFunc(found, func(a, b finding) int {
		if d := rank[a.reason] - rank[b.reason]; d != 0 {
			return d
		}
		if a.n != b.n {
			return b.n - a.n
		}
		// The cache lists pods in no order: ties are broken by the words, so the message never flips.
		return strings.Compare(a.detail, b.detail)
	})
	if len(found) == 0 {
		return "", ""
	}
	f := found[0]
	return f.reason, fmt.Sprintf("%d/%d pods %s", f.n, total, f.detail)
}

// OneTrouble is the trouble of one pod.
func OneTrouble(p *Pod) (reason, detail string) {
	for _, c := range p.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
				// ErrImagePull and ImagePullBackOff alternate while the kubelet retries: one reason for both.
				// The kubelet's words change between the two (and with the registry's): only the image is said.
				return webappv2.ReasonImagePullBackOff, fmt.Sprintf("cannot pull image %q", c.Image)
			}
		}
		// A crash loop is the back-off and the moments between (the container restarted, running but not ready
		// yet, or just ended): counted through all of them, so a restart changes nothing the status says.
		if w := c.State.Waiting; (w != nil && w.Reason == "CrashLoopBackOff") ||
			(!c.Ready && c.RestartCount > 1 && c.LastTerminationState.Terminated != nil) {
			return webappv2.ReasonCrashLoopBackOff, "CrashLoopBackOff: container " + c.Name + " " + lastExit(c)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return webappv2.ReasonUnschedulable, "unschedulable: " + c.Message
		}
	}
	return "", ""
}

// lastExit says how the container last ended: its exit code, or OOMKilled.
func lastExit(c corev1.ContainerStatus) string {
	t := c.LastTerminationState.Terminated
	switch {
	case t == nil:
		return "is restarting"
	case t.Reason == "OOMKilled":
		return fmt.Sprintf("was OOMKilled (exit code %d)", t.ExitCode)
	default:
		return fmt.Sprintf("exited with code %d", t.ExitCode)
	}
}

// Pod is a pod as the pod watch keeps it (Slim): what Trouble and the watch read, in a type of its own.
// A corev1.Pod is 1.2 KB of structs before anything is kept in it (its spec and status are structs, not pointers);
// this is a quarter of that, 10 MB less at 10,000 pods rolling out at once. Its fields have their paths in a Pod.
type Pod struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Status PodStatus
}

// PodStatus is what a Pod keeps of a pod's status.
type PodStatus struct {
	Conditions        []corev1.PodCondition
	ContainerStatuses []corev1.ContainerStatus
}

// DeepCopyObject makes Pod a runtime.Object, which the informer's store holds.
func (p *Pod) DeepCopyObject() runtime.Object {
	out := &Pod{TypeMeta: p.TypeMeta}
	p.DeepCopyInto(&out.ObjectMeta)
	if p.Status.Conditions != nil {
		out.Status.Conditions = make([]corev1.PodCondition, len(p.Status.Conditions))
		for i := range p.Status.Conditions {
			p.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
		}
	}
	if p.Status.ContainerStatuses != nil {
		out.Status.ContainerStatuses = make([]corev1.ContainerStatus, len(p.Status.ContainerStatuses))
		for i := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[i].DeepCopyInto(&out.Status.ContainerStatuses[i])
		}
	}
	return out
}

// Slim is the cache's transform of a pod: a Pod keeping name, namespace, UID, resourceVersion, the
// canary's revision label (no other: the watch's selector is the server's, and a pod's labels map was a tenth of
// its cached size), creation and deletion time, its controller's owner reference (not copied); the scheduling
// condition; per container its name, image, readiness, restart count, waiting state, when it started running and
// its last termination.
func Slim(o any) (any, error) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return o, nil
	}
	slim := &Pod{}
	slim.Name, slim.Namespace, slim.UID, slim.ResourceVersion = p.Name, p.Namespace, p.UID, p.ResourceVersion
	if rev, ok := p.Labels[webappv2.LabelCanaryRevision]; ok {
		slim.Labels = map[string]string{webappv2.LabelCanaryRevision: rev}
	}
	slim.DeletionTimestamp, slim.CreationTimestamp = p.DeletionTimestamp, p.CreationTimestamp
	slim.OwnerReferences = ControllerRefOnly(p.OwnerReferences)
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			slim.Status.Conditions = append(slim.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
		}
	}
	for _, c := range p.Status.ContainerStatuses {
		s := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: c.Ready, RestartCount: c.RestartCount}
		if w := c.State.Waiting; w != nil {
			s.State.Waiting = &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
		}
		if r := c.State.Running; r != nil {
			s.State.Running = &corev1.ContainerStateRunning{StartedAt: r.StartedAt}
		}
		if t := c.LastTerminationState.Terminated; t != nil {
			s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason}
		}
		slim.Status.ContainerStatuses = append(slim.Status.ContainerStatuses, s)
	}
	return slim, nil
}

// SlimTyped is Slim for a cache of some namespaces, whose reads through the client need the Pod type (a
// store per namespace, no single one to read in place): the same fields, in a Pod; AsCached reads them.
func SlimTyped(o any) (any, error) {
	slim, _ := Slim(o)
	c, ok := slim.(*Pod)
	if !ok {
		return o, nil
	}
	p := &corev1.Pod{ObjectMeta: c.ObjectMeta}
	p.Status.Conditions, p.Status.ContainerStatuses = c.Status.Conditions, c.Status.ContainerStatuses
	return p, nil
}

// AsCached is the pod p as a Pod, sharing its fields (not copied).
func AsCached(p *corev1.Pod) *Pod {
	return &Pod{TypeMeta: p.TypeMeta, ObjectMeta: p.ObjectMeta, Status: PodStatus{Conditions: p.Status.Conditions, ContainerStatuses: p.Status.ContainerStatuses}}
}

// ControllerRefOnly is the controller's entry of refs, as a slice of refs itself (no copy), or nil.
func ControllerRefOnly(refs []metav1.OwnerReference) []metav1.OwnerReference {
	for i := range refs {
		if c := refs[i].Controller; c != nil && *c {
			return refs[i : i+1 : i+1]
		}
	}
	return nil
}

// ControllerUID is the UID of o's controller when it is an object of kind in the apps group ("" otherwise): a pod's
// ReplicaSet, a ReplicaSet's Deployment. The UID names the very object; a name could be anyone's next one.
func ControllerUID(o metav1.Object, kind string) types.UID {
	if ref := ControllerOfKind(o, appsv1.GroupName, kind); ref != nil {
		return ref.UID
	}
	return ""
}

// ControllerOfKind is o's controller's owner reference (not copied) when it names an object of kind in group, of
// any version; nil otherwise.
func ControllerOfKind(o metav1.Object, group, kind string) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(o)
	if ref == nil || ref.Kind != kind {
		return nil
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != group {
		return nil
	}
	return ref
}

// OwnedDeployment is the UID of dep when app controls it, "" otherwise (nil included): only the pods of a
// Deployment of the WebApp's are its pods.
func OwnedDeployment(app *webappv2.WebApp, dep *appsv1.Deployment) types.UID {
	if dep == nil {
		return ""
	}
	if ref := metav1.GetControllerOfNoCopy(dep); ref == nil || ref.UID != app.UID {
		return ""
	}
	return dep.UID
}

// Owned are the pods among pods that a ReplicaSet among replicaSets controls, which the Deployment dep
// controls: the pods dep made, by the owner chain's UIDs (labels anyone can copy). pods is filtered in place.
func Owned(dep types.UID, replicaSets []metav1.PartialObjectMetadata, pods []*Pod) []*Pod {
	if dep == "" {
		return nil
	}
	made := map[types.UID]bool{}
	for i := range replicaSets {
		if ControllerUID(&replicaSets[i], "Deployment") == dep {
			made[replicaSets[i].UID] = true
		}
	}
	return slices.DeleteFunc(pods, func(p *Pod) bool { return !made[ControllerUID(p, "ReplicaSet")] })
}

// ReplicaSetList is an empty list of ReplicaSets as the operator reads them: their metadata only.
func ReplicaSetList() *metav1.PartialObjectMetadataList {
	return &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSetList"}}
}

// ProbeFailures are the last failed probe's words of each pod that runs but is not ready, by pod UID.
type ProbeFailures map[types.UID]string

// Bounds of the probe events' read.
const (
	// probeRecheck is when a WebApp with a pod that runs unready is looked at again: the kubelet's event of a
	// failed probe changes nothing in the pod, and the first probes of a starting app often fail for another reason
	// than the later ones (connection refused until it listens, then its own answer).
	probeRecheck = 5 * time.Second
	// probeRecheckFor is how long after the container started that goes on (a slow first probe is not a failure).
	probeRecheckFor = 2 * time.Minute
	// MaxProbeReads bounds the pods whose events one reconcile reads (the first by name).
	MaxProbeReads = 10
	// maxProbeWords bounds the words of one probe failure that the status repeats.
	maxProbeWords = 512
	// Recheck is when a WebApp that needs its pods is looked at again while the pod watch lists them: the
	// events of that first list may be handled before the informer counts itself synced.
	Recheck = time.Second
)

// ProbeRecheckAfter is when to read the probes' words of the unready pods again (0: not before something changes):
// soon while one of them started recently, since neither its first failed probe nor a change of its words changes
// an object the operator watches.
func ProbeRecheckAfter(unready []*Pod, now time.Time) time.Duration {
	for _, p := range unready {
		if now.Sub(RunningSince(p)) < probeRecheckFor {
			return probeRecheck
		}
	}
	return 0
}

// LastProbeFailure is the words of the last failed readiness or startup probe among a pod's Unhealthy events since
// its container started ("" when none).
func LastProbeFailure(events []corev1.Event, started time.Time) string {
	// Timestamps of events and container starts are to the second.
	since := started.Truncate(time.Second)
	var words string
	var last time.Time
	for i := range events {
		e := &events[i]
		// The kubelet prefixes a message it aggregated; a liveness probe's failure restarts the container, and that
		// is the crash loop's to report.
		msg := strings.TrimPrefix(e.Message, "(combined from similar events): ")
		if !strings.HasPrefix(msg, "Readiness probe") && !strings.HasPrefix(msg, "Startup probe") {
			continue
		}
		if at := lastSeen(e); !at.Before(since) && (words == "" || at.After(last)) {
			words, last = TruncateTo(msg, maxProbeWords), at
		}
	}
	return words
}

// AwaitsReadiness says the pod's containers all run and one of them is not ready.
func AwaitsReadiness(p *Pod) bool {
	if p.DeletionTimestamp != nil || len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	ready := true
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
		ready = ready && c.Ready
	}
	return !ready
}

// RunningSince is when the pod's last container started.
func RunningSince(p *Pod) time.Time {
	var t time.Time
	for _, c := range p.Status.ContainerStatuses {
		if r := c.State.Running; r != nil && r.StartedAt.After(t) {
			t = r.StartedAt.Time
		}
	}
	return t
}

// lastSeen is when an event last happened, whichever API wrote it.
func lastSeen(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	default:
		return e.EventTime.Time
	}
}

// TruncateTo cuts s to n bytes at most, on a character's boundary.
func TruncateTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}

package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv2 "github.com/example/webapp-operator/apis/v2"
)

// Reasons of Ready and Progressing when the pods of a rollout that does not progress say why.
const (
	ReasonImagePullBackOff = "ImagePullBackOff"
	ReasonCrashLoopBackOff = "CrashLoopBackOff"
	ReasonUnschedulable    = "Unschedulable"
)

// podTrouble says what keeps the WebApp's pods from running, from the pods as the cache keeps them (slimPod):
// an image that cannot be pulled, a crash loop, a pod the scheduler cannot place; "" when none of these. The most
// telling trouble wins (pull before crash before scheduling), with how many of the pods have it. The message
// holds only what stays the same while the trouble does (never a restart count or a back-off's wait), so a
// crash-looping pod's every restart costs no status write.
func podTrouble(pods []*corev1.Pod) (reason, msg string) {
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
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		total++
		if reason, detail := oneTrouble(p); reason != "" {
			add(reason, detail)
		}
	}
	rank := map[string]int{ReasonImagePullBackOff: 0, ReasonCrashLoopBackOff: 1, ReasonUnschedulable: 2}
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

// oneTrouble is the trouble of one pod.
func oneTrouble(p *corev1.Pod) (reason, detail string) {
	for _, c := range p.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
				// ErrImagePull and ImagePullBackOff alternate while the kubelet retries: one reason for both.
				// The kubelet's words change between the two (and with the registry's): only the image is said.
				return ReasonImagePullBackOff, fmt.Sprintf("cannot pull image %q", c.Image)
			}
		}
		// A crash loop is the back-off and the moments between (the container restarted, running but not ready
		// yet, or just ended): counted through all of them, so a restart changes nothing the status says.
		if w := c.State.Waiting; (w != nil && w.Reason == "CrashLoopBackOff") ||
			(!c.Ready && c.RestartCount > 1 && c.LastTerminationState.Terminated != nil) {
			return ReasonCrashLoopBackOff, "CrashLoopBackOff: container " + c.Name + " " + lastExit(c)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return ReasonUnschedulable, "unschedulable: " + c.Message
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

// slimPod keeps of a cached pod what podTrouble and the watch read: name, namespace, UID, resourceVersion, labels,
// deletion time; the scheduling condition; per container its name, image, readiness, restart count, waiting state
// and last termination.
func slimPod(o any) (any, error) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return o, nil
	}
	slim := &corev1.Pod{}
	slim.Name, slim.Namespace, slim.UID, slim.ResourceVersion = p.Name, p.Namespace, p.UID, p.ResourceVersion
	slim.Labels, slim.DeletionTimestamp = p.Labels, p.DeletionTimestamp
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
		if t := c.LastTerminationState.Terminated; t != nil {
			s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason}
		}
		slim.Status.ContainerStatuses = append(slim.Status.ContainerStatuses, s)
	}
	return slim, nil
}

// podsByWebApp is the pod informer's index of pods by their WebApp ("namespace/name", from the instance label).
const podsByWebApp = "webapp.example.com/pods-by-webapp"

// webAppOfPod is the WebApp a pod of ours belongs to (its instance label).
func webAppOfPod(o client.Object) (client.ObjectKey, bool) {
	name := o.GetLabels()[LabelInstance]
	return client.ObjectKey{Namespace: o.GetNamespace(), Name: name}, name != ""
}

// podsOf are app's pods from the cache, not copied: they must not be changed (nil when the cache cannot say: then no
// trouble is claimed). The resync's fingerprint reads them for every WebApp, so they come from an index of the
// informer's store, without a copy or a scan of the namespace.
func (r *WebAppReconciler) podsOf(ctx context.Context, app *webappv2.WebApp) []*corev1.Pod {
	if r.pods != nil {
		items, err := r.pods.ByIndex(podsByWebApp, app.Namespace+"/"+app.Name)
		if err != nil {
			return nil
		}
		pods := make([]*corev1.Pod, 0, len(items))
		for _, it := range items {
			if p, ok := it.(*corev1.Pod); ok {
				pods = append(pods, p)
			}
		}
		return pods
	}
	list := &corev1.PodList{}
	if err := r.Client.List(ctx, list, client.InNamespace(app.Namespace), client.MatchingLabels(selectorLabels(app))); err != nil {
		return nil
	}
	pods := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	return pods
}

// podIndexer adds the index podsByWebApp to the cache's pod informer and returns its indexer (nil for a cache whose
// informer has none).
func podIndexer(ctx context.Context, c cache.Cache) (toolscache.Indexer, error) {
	inf, err := c.GetInformer(ctx, &corev1.Pod{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, err
	}
	if err := inf.AddIndexers(toolscache.Indexers{podsByWebApp: func(o any) ([]string, error) {
		if p, ok := o.(*corev1.Pod); ok && p.Labels[LabelName] == appName {
			if key, ok := webAppOfPod(p); ok {
				return []string{key.Namespace + "/" + key.Name}, nil
			}
		}
		return nil, nil
	}}); err != nil {
		return nil, err
	}
	if i, ok := inf.(interface{ GetIndexer() toolscache.Indexer }); ok {
		return i.GetIndexer(), nil
	}
	return nil, nil
}

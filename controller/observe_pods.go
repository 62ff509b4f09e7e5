package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/pods"
	"github.com/example/webapp-operator/controller/status"
)

// podsOf are the pods app's Deployment dep made (none when dep is not app's), as the pod watch has them, not
// copied: they must not be changed. known is false while the watch is stopped or has not listed them and their
// ReplicaSets yet (then no trouble is claimed). Without a watch (a client without a cache, in unit tests) they are
// listed.
func (r *WebAppReconciler) podsOf(ctx context.Context, app *webappv2.WebApp, dep *appsv1.Deployment) (podList []*pods.Pod, known bool) {
	podList, known, _ = r.readPodList(ctx, app, dep)
	return podList, known
}

// readPodList is podsOf, and whether the pod watch is listing the pods (only when they are not known).
func (r *WebAppReconciler) readPodList(ctx context.Context, app *webappv2.WebApp, dep *appsv1.Deployment) (podList []*pods.Pod, known, listing bool) {
	uid := pods.OwnedDeployment(app, dep)
	if r.podWatch != nil {
		return r.podWatch.podsOf(ctx, app.Namespace, uid)
	}
	if uid == "" {
		return nil, true, false
	}
	full, err := OwnedPods(ctx, r.Client, app, dep)
	if err != nil {
		return nil, false, false
	}
	podList = make([]*pods.Pod, len(full))
	for i, p := range full {
		podList[i] = pods.AsCached(p)
	}
	return podList, true, false
}

// OwnedPods lists the pods app's Deployment dep made (pods.Owned: controlled by UID at each link), sorted by name,
// through dep's own selector (the canary's pods do not all carry the stable pods' labels). The reconciler's path
// without a pod watch, and kubectl-webapp's.
func OwnedPods(ctx context.Context, c client.Reader, app *webappv2.WebApp, dep *appsv1.Deployment) ([]*corev1.Pod, error) {
	uid := pods.OwnedDeployment(app, dep)
	if uid == "" {
		return nil, nil
	}
	selector := client.MatchingLabels(desired.SelectorLabels(app))
	if dep.Spec.Selector != nil {
		selector = dep.Spec.Selector.MatchLabels
	}
	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.InNamespace(app.Namespace), selector); err != nil {
		return nil, fmt.Errorf("listing the pods of Deployment %s: %w", dep.Name, err)
	}
	replicaSets := pods.ReplicaSetList()
	if err := c.List(ctx, replicaSets, client.InNamespace(app.Namespace), selector); err != nil {
		return nil, fmt.Errorf("listing the ReplicaSets of Deployment %s: %w", dep.Name, err)
	}
	byUID := make(map[types.UID]*corev1.Pod, len(list.Items))
	slim := make([]*pods.Pod, len(list.Items))
	for i := range list.Items {
		byUID[list.Items[i].UID] = &list.Items[i]
		slim[i] = pods.AsCached(&list.Items[i])
	}
	var out []*corev1.Pod
	for _, p := range pods.Owned(uid, replicaSets.Items, slim) {
		out = append(out, byUID[p.UID])
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// readPods reads what app's pods of its Deployment dep say: their trouble, the failed probes of those that run
// unready, and the mounted ConfigMaps and Secrets that are missing.
func (r *WebAppReconciler) readPods(ctx context.Context, app *webappv2.WebApp, dep *appsv1.Deployment) podsObserved {
	p := podsObserved{read: true}
	// A mounted ConfigMap or Secret that is missing shows in no field of the pod: the cache says (an error leaves it
	// unsaid, never claimed).
	p.missing, _ = r.missingSources(ctx, app)
	p.list, p.known, p.listing = r.readPodList(ctx, app, dep)
	p.probes, p.wait = r.probeFailures(ctx, app.Namespace, p.list)
	return p
}

// needsPods: app's Deployment is not rolled out, or a canary runs, so its pods may say why (a rolled-out one has every pod ready,
// and a pod that stops being ready changes the Deployment's status, which brings the WebApp back).
func needsPods(app *webappv2.WebApp, obs status.Observation) bool {
	// A canary's pods are watched for as long as it runs: their trouble rolls it back.
	return obs.Dep != nil && !status.RolledOut(obs.Dep, status.DesiredReplicas(app, obs)) || obs.Canary.Running()
}

// probeFailures reads the kubelet's events of failed readiness and startup probes (reason Unhealthy) of each pod
// that runs without being ready and has no other trouble (at most pods.MaxProbeReads of them, one list each, from the
// API server's watch cache): the words of a failing probe are in no field of the pod. It says when to look again
// (pods.ProbeRecheckAfter).
func (r *WebAppReconciler) probeFailures(ctx context.Context, namespace string, podList []*pods.Pod) (pods.ProbeFailures, time.Duration) {
	var unready []*pods.Pod
	for _, p := range podList {
		if reason, _ := pods.OneTrouble(p); reason == "" && pods.AwaitsReadiness(p) {
			unready = append(unready, p)
		}
	}
	if len(unready) == 0 {
		return nil, 0
	}
	slices.SortFunc(unready, func(a, b *pods.Pod) int { return strings.Compare(a.Name, b.Name) })
	found := pods.ProbeFailures{}
	for _, p := range unready[:min(len(unready), pods.MaxProbeReads)] {
		list := &corev1.EventList{}
		err := r.reader().List(ctx, list, client.InNamespace(namespace), &client.ListOptions{
			FieldSelector: fields.SelectorFromSet(fields.Set{"involvedObject.uid": string(p.UID), "reason": "Unhealthy"}),
			Raw:           &metav1.ListOptions{ResourceVersion: "0"},
		})
		if err != nil {
			log.FromContext(ctx).V(1).Info("reading a pod's failed probes", "pod", p.Name, "error", err.Error())
			continue
		}
		if words := pods.LastProbeFailure(list.Items, pods.RunningSince(p)); words != "" {
			found[p.UID] = words
		}
	}
	return found, pods.ProbeRecheckAfter(unready, time.Now())
}

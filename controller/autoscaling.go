package controller

import (
	"context"
	"encoding/json"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/ssa"
)

// hpaExists reports whether app's HorizontalPodAutoscaler exists, as the cache has it: controlled by app and not
// being deleted. Only then does the HPA decide the count (desired.ReplicasByHPA); until then (not created yet, refused by
// the API, deleted by someone) the WebApp does. Without autoscaling nothing is read.
func (r *WebAppReconciler) hpaExists(ctx context.Context, app *webappv2.WebApp) (bool, error) {
	if app.Spec.Autoscaling == nil {
		return false, nil
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(app), hpa); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	ref := metav1.GetControllerOf(hpa)
	return ref != nil && ref.UID == app.UID && hpa.DeletionTimestamp == nil, nil
}

// handOverReplicas passes the Deployment's replica count to the HorizontalPodAutoscaler once it exists, without
// the count ever dropping to the default, and reports whether it wrote. It runs just before an apply to dep, the
// Deployment as the decision to send was made on. Leaving spec.replicas out of our apply releases it; a field
// released that no other field manager owns is removed, and the Deployment would be defaulted to 1 replica until the
// HPA's next sync. So, first, our field manager applies the count it owns through the scale subresource: that entry
// (the same manager, subresource scale) keeps spec.replicas owned while the apply without it releases our main
// entry's claim, and the HPA's first write through /scale takes it over from there (an update takes a field from
// an apply without conflict). The value applied is our own, the one our main entry holds (the WebApp's count,
// clamped into the HPA's range when it was applied), never one read from another manager. Nothing is sent while
// the HPA does not decide the count, or when our main entry does not own it (after the handover, and when someone
// else, the HPA, has written it since).
func handOverReplicas(ctx context.Context, r *WebAppReconciler, app *webappv2.WebApp, in inputs, cur client.Object) (bool, error) {
	dep, ok := cur.(*appsv1.Deployment)
	if !ok || !desired.ReplicasByHPA(app, in.HPAExists) {
		return false, nil
	}
	owned, err := appsv1ac.ExtractDeployment(dep, webappv2.FieldManager)
	if err != nil {
		return false, err
	}
	if owned.Spec == nil || owned.Spec.Replicas == nil || scaleHeld(dep) {
		// Nothing of ours to hand over, or handed over already: our scale entry holds the count (an apply the
		// server refused after an earlier handover, tried again, must not repeat it).
		return false, nil
	}
	n := *owned.Spec.Replicas
	body, err := json.Marshal(map[string]any{
		"apiVersion": "autoscaling/v1", "kind": "Scale",
		"metadata": map[string]any{"name": dep.Name, "namespace": dep.Namespace, "uid": dep.UID},
		"spec":     map[string]any{"replicas": n},
	})
	if err != nil {
		return false, err
	}
	// Not forced: the value is the one our main entry holds, so it conflicts only with a manager that has changed
	// the count since dep was read (the HPA's first write); then the count is not ours to hand over any more. (The
	// answer is decoded into the Scale body: dep, which the apply still reads, is left as it is.)
	err = r.Client.SubResource("scale").Patch(ctx, dep, client.RawPatch(types.ApplyPatchType, body), &client.SubResourcePatchOptions{
		SubResourceBody: &autoscalingv1.Scale{},
		PatchOptions:    client.PatchOptions{FieldManager: webappv2.FieldManager, Raw: &metav1.PatchOptions{}},
	})
	switch {
	case apierrors.IsConflict(err):
		log.FromContext(ctx).Info("the replica count was taken by another field manager before our handover; nothing to hand over", "error", err.Error())
		ssa.AppliesTotal.WithLabelValues("Scale", ssa.ResultFailed).Inc()
		return false, nil
	case err != nil:
		ssa.AppliesTotal.WithLabelValues("Scale", ssa.ResultFailed).Inc()
		return false, err
	}
	log.FromContext(ctx).Info("handed the replica count over to the HorizontalPodAutoscaler", "replicas", n)
	ssa.AppliesTotal.WithLabelValues("Scale", ssa.ResultSent).Inc()
	return true, nil
}

// scaleHeld: our field manager's entry of the scale subresource owns dep's spec.replicas.
func scaleHeld(dep *appsv1.Deployment) bool {
	for _, e := range dep.ManagedFields {
		if e.Manager == webappv2.FieldManager && e.Subresource == "scale" && e.FieldsV1 != nil && strings.Contains(e.FieldsV1.GetRawString(), `"f:replicas"`) {
			return true
		}
	}
	return false
}

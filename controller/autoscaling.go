package controller

import (
	"context"
	"encoding/json"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	webappv2 "github.com/example/webapp-operator/apis/v2"
)

// handOverReplicas passes the Deployment's replica count to the HorizontalPodAutoscaler when autoscaling is switched
// on, without the count ever dropping to the default. Leaving spec.replicas out of our apply releases it; a field
// released that no other field manager owns is removed, and the Deployment would be defaulted to 1 replica until the
// HPA's next sync. So, first, our field manager applies the count it owns through the scale subresource: that entry
// (the same manager, subresource scale) keeps spec.replicas owned while the apply without it releases our main
// entry's claim, and the HPA's first write through /scale takes it over from there (an update takes a field from
// an apply without conflict). The value applied is our own, the one our main entry holds (clamped into the HPA's
// range), never one read from another manager. Nothing is sent when our main entry no longer owns the count:
// after the handover, and for a Deployment created without it.
func handOverReplicas(ctx context.Context, r *WebAppReconciler, app *webappv2.WebApp) error {
	a := app.Spec.Autoscaling
	if a == nil {
		return nil
	}
	dep := &appsv1.Deployment{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(app), dep); err != nil || notOursReason(dep, app.UID) != "" {
		// Missing (it is created without a count) or not ours (the apply reports it): nothing to hand over.
		return client.IgnoreNotFound(err)
	}
	owned, err := appsv1ac.ExtractDeployment(dep, FieldManager)
	if err != nil {
		return err
	}
	if owned.Spec == nil || owned.Spec.Replicas == nil {
		return nil
	}
	n := min(max(*owned.Spec.Replicas, ptr.Deref(a.MinReplicas, 1)), a.MaxReplicas)
	body, err := json.Marshal(map[string]any{
		"apiVersion": "autoscaling/v1", "kind": "Scale",
		"metadata": map[string]any{"name": dep.Name, "namespace": dep.Namespace, "uid": dep.UID},
		"spec":     map[string]any{"replicas": n},
	})
	if err != nil {
		return err
	}
	err = r.Client.SubResource("scale").Patch(ctx, dep, client.RawPatch(types.ApplyPatchType, body), &client.SubResourcePatchOptions{
		SubResourceBody: &autoscalingv1.Scale{},
		PatchOptions:    client.PatchOptions{FieldManager: FieldManager, Force: ptr.To(true), Raw: &metav1.PatchOptions{}},
	})
	log.FromContext(ctx).Info("handed the replica count over to the HorizontalPodAutoscaler", "replicas", n, "error", err)
	if err == nil {
		appliesTotal.WithLabelValues("Scale", resultSent).Inc()
	}
	return err
}

package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/desired"
)

// missingSources lists the ConfigMaps and Secrets that app's volumes mount and that do not exist, as
// `configmap "NAME" (volume "VOL")`, from the metadata cache (no read of the API server). An optional one is left
// out: the pods start without it.
func (r *WebAppReconciler) missingSources(ctx context.Context, app *webappv2.WebApp) ([]string, error) {
	var out []string
	for _, v := range app.Spec.Volumes {
		kind, name, optional := "", "", (*bool)(nil)
		switch {
		case v.ConfigMap != nil:
			kind, name, optional = "ConfigMap", v.ConfigMap.Name, v.ConfigMap.Optional
		case v.Secret != nil:
			kind, name, optional = "Secret", v.Secret.Name, v.Secret.Optional
		default:
			continue
		}
		if optional != nil && *optional {
			continue
		}
		switch _, _, found, err := r.peek(ctx, kind, types.NamespacedName{Namespace: app.Namespace, Name: name}); {
		case err != nil:
			return nil, err
		case !found:
			out = append(out, fmt.Sprintf("%s %q (volume %q)", strings.ToLower(kind), name, v.Name))
		}
	}
	return out, nil
}

// mountTrouble says why a volume keeps app's pods from starting ("" when none does): the missing ConfigMaps and
// Secrets, or the owned claim that is not bound while the pods cannot be scheduled (the scheduler's words are
// added: they say why no volume fits). A claim that waits for its first pod to bind is not trouble.
func mountTrouble(app *webappv2.WebApp, missing []string, claim *corev1.PersistentVolumeClaim, podReason, podMsg string) string {
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, strings.Join(missing, ", ")+" not found: the pods cannot start until it exists")
	}
	if v := desired.OwnedClaimVolume(app); v != nil && claim != nil {
		switch {
		case claim.Status.Phase == corev1.ClaimLost:
			parts = append(parts, fmt.Sprintf("claim %q (volume %q) is Lost: its volume is gone", claim.Name, v.Name))
		case claim.Status.Phase != corev1.ClaimBound && podReason == webappv2.ReasonUnschedulable:
			parts = append(parts, fmt.Sprintf("claim %q (volume %q) is not bound: %s", claim.Name, v.Name, podMsg))
		}
	}
	return strings.Join(parts, "; ")
}

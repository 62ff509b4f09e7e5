package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/ssa"
)

// claimInTheWay is the refusal to mount app's claim (nil: nothing in the way): a *heldError when the claim of the
// WebApp's name cannot be the spec's (claimRefusal), or the failure to read it. The Deployments that would mount it
// are then held as they are. Read from the cache, and from the API server where the cache has none: a claim without
// our managed-by label is never in the cache, and the claim's own create-only apply comes after the Deployment's.
func (r *WebAppReconciler) claimInTheWay(ctx context.Context, app *webappv2.WebApp) error {
	if desired.OwnedClaimVolume(app) == nil {
		return nil
	}
	key := client.ObjectKeyFromObject(app)
	pvc := &corev1.PersistentVolumeClaim{}
	err := r.Client.Get(ctx, key, pvc)
	if apierrors.IsNotFound(err) {
		err = r.reader().Get(ctx, key, pvc)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return &ssa.Error{Kind: "PersistentVolumeClaim", Key: key, Err: err, Read: true}
	}
	if ce := claimRefusal(pvc, app); ce != nil {
		return &heldError{by: ce}
	}
	return nil
}

// claimRefusal says why app's pods cannot mount pvc, the claim of its name (nil: they may). Either it is not
// app's (someone else's data would be in the pods), or its access modes are not the spec's: a claim's are
// immutable, so its apply will be refused, and pods rolled for the spec (more replicas, a rolling update) would
// wait forever on a claim one pod at a time mounts. (A claim the WebApp released and takes up again has the modes
// it was made with.) Its class and size are left to the claim's own apply: the pods can mount it either way.
func claimRefusal(pvc *corev1.PersistentVolumeClaim, app *webappv2.WebApp) *ssa.Error {
	key := client.ObjectKeyFromObject(pvc)
	if why := ssa.NotOursReason(pvc, app); why != "" {
		return &ssa.Error{Kind: "PersistentVolumeClaim", Key: key, NotOursReason: why}
	}
	v := desired.OwnedClaimVolume(app)
	if v == nil {
		return nil
	}
	want := v.Claim.AccessMode
	if want == "" {
		want = corev1.ReadWriteOnce
	}
	if have := pvc.Spec.AccessModes; len(have) > 0 && !slices.Equal(have, []corev1.PersistentVolumeAccessMode{want}) {
		msg := fmt.Sprintf("its access modes are %v, and the WebApp's claim asks for %s: a claim's access modes are immutable (keep %v, or remove the volume, delete the released claim and add the volume again)", have, want, have)
		return &ssa.Error{Kind: "PersistentVolumeClaim", Key: key,
			Err: apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim").GroupKind(), pvc.Name,
				field.ErrorList{field.Invalid(field.NewPath("spec", "accessModes"), have, msg)})}
	}
	return nil
}

// heldError says that a child is held as it is (neither created nor changed) because the claim its pods would
// mount cannot be the WebApp's (by: the claim's ssa.Error, not ours or of other access modes). The status reports
// by's reason (ChildNotOwned, InvalidChild), and still reports what it knows of the held Deployment.
type heldError struct {
	kind string
	key  types.NamespacedName
	by   *ssa.Error
}

func (e *heldError) Error() string {
	why := "which is not the WebApp's"
	if e.by.NotOursReason == "" {
		why = "which cannot be the WebApp's claim: " + e.by.Err.Error()
	}
	return fmt.Sprintf("%s %s is held as it is (not created or changed): its pods would mount %s %s, %s", e.kind, e.key, e.by.Kind, e.by.Key, why)
}

func (e *heldError) Unwrap() error { return e.by }

// handOverStrategy makes room for a Recreate strategy on a Deployment that rolled by RollingUpdate, and reports
// whether it wrote. The server defaulted strategy.rollingUpdate (25%/25%) when the Deployment was created, and no
// field manager owns it: an apply cannot remove a field it does not own, and the Deployment API refuses
// rollingUpdate beside type Recreate (kubernetes/kubernetes#24198), so the apply of Recreate alone would fail
// forever. So, first, our manager applies the strategy it already sends plus that rollingUpdate as the server has
// it, taking ownership of the defaults (it changes no value, so nothing rolls); the apply of Recreate that follows
// releases it, and the server removes it. Nothing is sent when rollingUpdate is owned by another manager: it is then
// theirs, and the Deployment's refusal is reported in the WebApp's status.
func handOverStrategy(ctx context.Context, r *WebAppReconciler, app *webappv2.WebApp, dep *appsv1.Deployment) (bool, error) {
	ru := dep.Spec.Strategy.RollingUpdate
	if !desired.Recreates(app) || ru == nil {
		return false, nil
	}
	if owners := managersOf(dep, "f:spec", "f:strategy", "f:rollingUpdate"); len(owners) > 0 {
		if len(owners) == 1 && owners[0] == webappv2.FieldManager {
			// Ours: the apply of Recreate releases it.
			return false, nil
		}
		log.FromContext(ctx).Info("strategy.rollingUpdate is owned by another field manager: it stays, and the Deployment refuses Recreate beside it", "managers", owners)
		return false, nil
	}
	// What our manager owns, plus the strategy as the server has it, guarded by UID and resourceVersion: it is
	// refused rather than applied over a Deployment changed or re-created since it was read.
	owned, err := appsv1ac.ExtractDeployment(dep, webappv2.FieldManager)
	if err != nil {
		return false, err
	}
	if owned.Spec == nil {
		owned.WithSpec(appsv1ac.DeploymentSpec())
	}
	take := appsv1ac.RollingUpdateDeployment()
	take.MaxSurge, take.MaxUnavailable = ru.MaxSurge, ru.MaxUnavailable
	owned.Spec.WithStrategy(appsv1ac.DeploymentStrategy().WithType(dep.Spec.Strategy.Type).WithRollingUpdate(take))
	owned.WithUID(dep.UID).WithResourceVersion(dep.ResourceVersion)
	if err := r.Client.Apply(ctx, owned, client.FieldOwner(webappv2.FieldManager), client.ForceOwnership); err != nil {
		ssa.AppliesTotal.WithLabelValues("Deployment", ssa.ResultFailed).Inc()
		return false, fmt.Errorf("taking over the defaulted strategy.rollingUpdate before Recreate: %w", err)
	}
	log.FromContext(ctx).Info("took over the defaulted strategy.rollingUpdate, so the Deployment can switch to Recreate")
	ssa.AppliesTotal.WithLabelValues("Deployment", ssa.ResultSent).Inc()
	return true, nil
}

// managersOf lists the field managers whose managedFields entry (of the main resource) owns the field at path
// (fieldsV1 keys, e.g. "f:spec", "f:strategy"), itself or anything below it.
func managersOf(obj client.Object, path ...string) []string {
	var out []string
	for _, e := range obj.GetManagedFields() {
		if e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		var node map[string]any
		if json.Unmarshal(e.FieldsV1.GetRawBytes(), &node) != nil {
			continue
		}
		found := true
		for _, k := range path {
			next, ok := node[k].(map[string]any)
			if !ok {
				found = false
				break
			}
			node = next
		}
		if found && !slices.Contains(out, e.Manager) {
			out = append(out, e.Manager)
		}
	}
	return out
}

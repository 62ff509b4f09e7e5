package desired

import (
	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
)

// Claim is the PersistentVolumeClaim the WebApp owns (nil: it owns none). It has the WebApp's name and a
// controller owner reference like every child; a claim kept on deletion (Retain, the default) is released by the
// finalizer before the WebApp goes, so garbage collection never takes it (ClaimKept).
func Claim(app *webappv2.WebApp) *corev1ac.PersistentVolumeClaimApplyConfiguration {
	v := OwnedClaimVolume(app)
	if v == nil {
		return nil
	}
	c := v.Claim
	mode := c.AccessMode
	if mode == "" {
		mode = corev1.ReadWriteOnce
	}
	// The API server rounds a claim's requests up to milli precision, as a container's: sent in that form.
	size := c.Size.Quantity()
	size.RoundUp(-3)
	spec := corev1ac.PersistentVolumeClaimSpec().
		WithAccessModes(mode).
		WithResources(corev1ac.VolumeResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceStorage: size}))
	if c.StorageClassName != nil {
		spec.WithStorageClassName(*c.StorageClassName)
	}
	return corev1ac.PersistentVolumeClaim(app.Name, app.Namespace).
		WithLabels(CommonLabels(app)).
		WithOwnerReferences(OwnerReference(app)).
		WithSpec(spec)
}

// ClaimKept says whether app's claim outlives it: it owns one whose deletionPolicy is not Delete. The WebApp then
// carries the finalizer, and its deletion releases the claim first.
func ClaimKept(app *webappv2.WebApp) bool {
	v := OwnedClaimVolume(app)
	return v != nil && v.Claim.DeletionPolicy != webappv2.ClaimDelete
}

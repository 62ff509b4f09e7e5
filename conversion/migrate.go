package conversion

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
)

var storageMigratedTotal = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "webapp_operator_storage_migrated_total",
	Help: "WebApps rewritten so that the API server stores them at the CRD's storage version (storage migration).",
})

func init() { metrics.Registry.MustRegister(storageMigratedTotal) }

// migrationBatch is how many WebApps one page of the migration lists (and one log line reports).
const migrationBatch = 100

// StorageMigrator rewrites every stored WebApp at the CRD's storage version, then sets the CRD's
// status.storedVersions to that version alone, so that older versions can later be removed from the CRD. It runs
// when a replica starts leading and again whenever the storage version changes (checked every Recheck: one read
// of the CRD), is idempotent (a rewrite of a WebApp already at the storage version writes nothing) and resumes
// from the start after a restart: status.storedVersions is changed only after a complete pass.
// (The cluster's StorageVersionMigration API is off by default and cannot be relied on.)
type StorageMigrator struct {
	// Reader reads the CRD and lists the WebApps from the API server: uncached (a cache would hold every WebApp's
	// metadata a second time, and cannot page).
	Reader client.Reader
	// Client writes.
	Client client.Client
	// Ready is closed once this replica's conversion webhook can serve: reading stored WebApps at another version
	// needs it.
	Ready <-chan struct{}
	// Recheck is how often the CRD is read for a new storage version once migrated (0: never; Start returns).
	Recheck time.Duration
}

// NeedLeaderElection is true: one replica migrates.
func (*StorageMigrator) NeedLeaderElection() bool { return true }

// Start migrates, retrying with a backoff until done or stopped.
func (m *StorageMigrator) Start(ctx context.Context) error {
	select {
	case <-m.Ready:
	case <-ctx.Done():
		return nil
	}
	logger := log.FromContext(ctx).WithName("storage-migration")
	for {
		backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: 5 * time.Minute}
		_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
			if err := m.migrate(ctx); err != nil {
				logger.Error(err, "storage migration failed; retrying")
				return false, nil
			}
			return true, nil
		})
		if m.Recheck <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(m.Recheck):
		}
	}
}

// migrate is one complete pass, or nothing when the CRD's status says every object is at the storage version.
func (m *StorageMigrator) migrate(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("storage-migration")
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := m.Reader.Get(ctx, client.ObjectKey{Name: CRDName}, crd); err != nil {
		return fmt.Errorf("reading the CRD %s: %w", CRDName, err)
	}
	storage, index, stored, unserved, err := storageVersions(crd)
	if err != nil {
		return err
	}
	if slices.Equal(stored, []string{storage}) {
		logger.V(1).Info("every WebApp is stored at the storage version", "storageVersion", storage)
		return nil
	}
	logger.Info("migrating stored WebApps", "storageVersion", storage, "storedVersions", stored)

	total := 0
	// Listed at the storage version: a version on its way out may no longer be served. Only the metadata is
	// needed, but for a rollback to v1, where each object's conversion data is kept in the legacy annotation too.
	for cont := ""; ; {
		page, err := m.list(ctx, storage, cont)
		if err != nil {
			return fmt.Errorf("listing WebApps: %w", err)
		}
		for _, app := range page.items {
			if err := m.rewrite(ctx, app, storage, unserved); err != nil {
				return err
			}
		}
		total += len(page.items)
		storageMigratedTotal.Add(float64(len(page.items)))
		logger.Info("migrated a batch of WebApps", "batch", len(page.items), "total", total, "storageVersion", storage)
		if cont = page.cont; cont == "" {
			break
		}
	}

	// Only the storage version is left, guarded: the storage version is still the one migrated to, and the list
	// is still the one read (a rollback's storage change or another migrator in between makes this fail and retry).
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": fmt.Sprintf("/spec/versions/%d/storage", index), "value": true},
		{"op": "test", "path": "/status/storedVersions", "value": stored},
		{"op": "replace", "path": "/status/storedVersions", "value": []string{storage}},
	})
	if err != nil {
		return err
	}
	if err := m.Client.Status().Patch(ctx, crd, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("setting the CRD's status.storedVersions to [%s]: %w", storage, err)
	}
	logger.Info("storage migration complete", "migrated", total, "storedVersions", []string{storage})
	return nil
}

// stored is a WebApp to rewrite: its metadata, and, in a rollback to v1, its conversion data.
type stored struct {
	meta *metav1.PartialObjectMetadata
	data string
}

type page struct {
	items []stored
	cont  string
}

// list reads one page of WebApps at the storage version: their metadata only, but for v1, whose status carries
// the conversion data to keep in the legacy annotation.
func (m *StorageMigrator) list(ctx context.Context, storage, cont string) (page, error) {
	apiVersion := webappv2.GroupVersion.Group + "/" + storage
	if storage != webappv1.GroupVersion.Version {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(webappv2.GroupVersion.WithKind("WebAppList"))
		list.APIVersion = apiVersion
		if err := m.Reader.List(ctx, list, client.Limit(migrationBatch), client.Continue(cont)); err != nil {
			return page{}, err
		}
		p := page{cont: list.Continue}
		for i := range list.Items {
			p.items = append(p.items, stored{meta: &list.Items[i]})
		}
		return p, nil
	}
	list := &webappv1.WebAppList{}
	if err := m.Reader.List(ctx, list, client.Limit(migrationBatch), client.Continue(cont)); err != nil {
		return page{}, err
	}
	p := page{cont: list.Continue}
	for i := range list.Items {
		app := &list.Items[i]
		meta := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "WebApp"}, ObjectMeta: app.ObjectMeta}
		p.items = append(p.items, stored{meta: meta, data: app.Status.ConversionData})
	}
	return p, nil
}

// rewrite makes the API server store app at the storage version: a write that changes nothing is still a write
// when the stored encoding is of another version. Server-Side Apply cannot express it (an apply under our field
// manager would release what the manager owns on the WebApp, its finalizer), so it is a JSON patch guarded by a
// test of the UID: the narrowest write there is. A WebApp gone since the list needs nothing.
//
// The same patch moves the managedFields entries of versions that are no longer served (a rollback's v2) to the
// storage version, because the API server cannot write an object that has entries of a version it does not know
// any more ("request to convert CR to an invalid group/version"): an entry that owns only metadata and status
// (the same fields in every version: the operator's status and finalizer) is relabelled; one that owns spec fields
// (a user's apply of the other version, whose field paths differ) is dropped, and its fields stay, unowned, until
// that user applies again. That part is also guarded by the resourceVersion read.
//
// In a rollback to v1 the same patch also copies each object's conversion data into the legacy annotation, guarded
// by the resourceVersion read: the release before v2 has a CRD without status.conversionData, whose schema prunes
// it, and keeps the annotation, which this release reads again when it is upgraded to (what does not fit in the
// annotations' 256 KiB is left out, and logged).
func (m *StorageMigrator) rewrite(ctx context.Context, s stored, storage string, unserved []string) error {
	app := s.meta
	// What is written besides the rewrite itself is computed from what was read: guarded by its resourceVersion.
	var writes []map[string]any
	if keep := s.data != "" && s.data != noData && app.Annotations[LegacyDataAnnotation] != s.data; keep && fitsAnnotations(app.Annotations, s.data) {
		writes = append(writes, addAnnotationOp(app.Annotations, LegacyDataAnnotation, s.data))
	} else if keep {
		log.FromContext(ctx).Info("the conversion data does not fit in the annotations: the release before v2 will not keep the v2-only fields",
			"namespace", app.Namespace, "name", app.Name)
	}
	if entries, changed := moveEntries(app.ManagedFields, webappv2.GroupVersion.Group, storage, unserved); changed {
		if len(entries) == 0 {
			// An empty list would leave managedFields as they are: one empty entry clears them (the API's way).
			entries = []metav1.ManagedFieldsEntry{{}}
		}
		writes = append(writes, map[string]any{"op": "replace", "path": "/metadata/managedFields", "value": entries})
	}
	ops := []map[string]any{{"op": "test", "path": "/metadata/uid", "value": app.UID}}
	if len(writes) > 0 {
		ops = append(append(ops, map[string]any{"op": "test", "path": "/metadata/resourceVersion", "value": app.ResourceVersion}), writes...)
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	err = m.Client.Patch(ctx, app, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(webappv2.FieldManager))
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	default:
		// Replaced or changed since the list: the pass is retried (the new object needs migrating too).
		return fmt.Errorf("rewriting WebApp %s/%s: %w", app.Namespace, app.Name, err)
	}
}

// fitsAnnotations says whether the legacy annotation with data fits in the API's limit on all annotations.
func fitsAnnotations(annotations map[string]string, data string) bool {
	size := len(LegacyDataAnnotation) + len(data)
	for k, v := range annotations {
		if k != LegacyDataAnnotation {
			size += len(k) + len(v)
		}
	}
	return size <= apivalidation.TotalAnnotationSizeLimitB
}

// moveEntries relabels to storage the managedFields entries of unserved versions that own only metadata and
// status, and drops those that own more; changed says whether any entry was of an unserved version.
func moveEntries(entries []metav1.ManagedFieldsEntry, group, storage string, unserved []string) ([]metav1.ManagedFieldsEntry, bool) {
	var out []metav1.ManagedFieldsEntry
	changed := false
	for _, e := range entries {
		if !slices.ContainsFunc(unserved, func(v string) bool { return e.APIVersion == group+"/"+v }) {
			out = append(out, e)
			continue
		}
		changed = true
		// Relabelled unless an entry of the same manager, operation and subresource is already at the storage
		// version (the server keeps one entry per identity): that one's fields stay owned.
		same := func(o metav1.ManagedFieldsEntry) bool {
			return o.Manager == e.Manager && o.Operation == e.Operation && o.Subresource == e.Subresource && o.APIVersion == group+"/"+storage
		}
		if ownsOnlyMetadataAndStatus(e) && !slices.ContainsFunc(entries, same) {
			e.APIVersion = group + "/" + storage
			out = append(out, e)
		}
	}
	return out, changed
}

func ownsOnlyMetadataAndStatus(e metav1.ManagedFieldsEntry) bool {
	if e.FieldsV1 == nil {
		return true
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(e.FieldsV1.GetRawBytes(), &top) != nil {
		return false
	}
	for k := range top {
		if k != "f:metadata" && k != "f:status" && k != "." {
			return false
		}
	}
	return true
}

// storageVersions reads the CRD's storage version (and its index in spec.versions), status.storedVersions, and
// the versions it no longer serves.
func storageVersions(crd *unstructured.Unstructured) (string, int, []string, []string, error) {
	versions, _, err := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if err != nil {
		return "", 0, nil, nil, err
	}
	storage, index := "", -1
	var unserved []string
	for i, v := range versions {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		if s, _ := m["storage"].(bool); s {
			storage, index = name, i
		}
		if served, _ := m["served"].(bool); !served {
			unserved = append(unserved, name)
		}
	}
	if index < 0 {
		return "", 0, nil, nil, fmt.Errorf("the CRD %s has no storage version", CRDName)
	}
	stored, _, err := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
	return storage, index, stored, unserved, err
}

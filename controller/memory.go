package controller

import (
	"crypto/sha256"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	webappv2ac "github.com/example/webapp-operator/applyconfig/apis/v2"
	"github.com/example/webapp-operator/controller/ssa"
)

// memory is everything the controller remembers between reconciles: one record per WebApp, under one lock. It is
// only ever an optimisation or a pace, never the truth: a restarted operator remembers nothing and decides the same
// from what is stored (at the cost of comparisons, and at most one request per object). A WebApp that is gone
// leaves nothing behind (forget).
type memory struct {
	mu      sync.Mutex
	records map[types.NamespacedName]*record
	// failing indexes, by namespace, the WebApps whose last reconcile failed: a ResourceQuota's or a Namespace's
	// event looks up its namespace's, never scans every record under the lock.
	failing map[string]map[types.NamespacedName]struct{}
}

// record is what is remembered of one WebApp and its children.
type record struct {
	// converged is the fingerprint (its digest) of what the last reconcile read, when it sent nothing and failed
	// nowhere; or retrying followed by the fingerprint's digest when it failed (see leftAlone).
	converged string
	// config is the config hash last computed and the resourceVersions it was computed from.
	config configMemo
	// status is the last status write: its shape, when, and the retained fields it listed.
	status statusWrite
	// found are retained fields found by applies whose status is not yet stored (its write failed or waits): the
	// apply that let go of a field is the only one that can tell, so they are kept until a status lists them.
	found    []webappv2.RetainedField
	foundUID types.UID
	// sent is, per kind written ("Deployment", ..., "WebApp" for the finalizer, "WebAppStatus"), the desired state
	// last sent or found owned: a few entries, looked up in order (a map of them cost twice the memory).
	sent []kindEntry
	// droppedReported is the WebApp (UID and generation) whose conversion's drop was last told by an event.
	droppedReported string
}

// kindEntry is the sentEntry of one kind of object.
type kindEntry struct {
	kind string
	sentEntry
}

// configMemo is the config hash last computed for a WebApp and the resourceVersions it was computed from.
type configMemo struct {
	versions, hash string
}

// statusWrite is a status write of the WebApp uid: the digest of its shape (what is never held back), when, and the
// status.retainedFields it wrote (for a reconcile whose cached WebApp is behind that write).
type statusWrite struct {
	uid      types.UID
	shape    string
	at       time.Time
	retained []webappv2.RetainedField
}

// sentEntry is the desired state (hashed) last sent to, or found owned on, one object, with the object's UID and
// resourceVersion then: until either changes no comparison or write is needed, so a difference only we see (a
// server default we do not know of) costs one no-op apply per restart, never one per resync.
type sentEntry struct {
	uid  types.UID
	rv   string
	hash [sha256.Size]byte
	// refused is the server's refusal of exactly this desired state, if it refused it (rare: a pointer keeps the
	// entry small for every WebApp that was not refused).
	refused *refusal
}

// refusal is a server's refusal of a desired state: it is not sent again before until unless the object or the
// desired state changes.
type refusal struct {
	err   error
	until time.Time
}

// record returns the record of key, created if create is set (nil otherwise when there is none). The caller
// holds m.mu.
func (m *memory) record(key types.NamespacedName, create bool) *record {
	rec := m.records[key]
	if rec == nil && create {
		if m.records == nil {
			m.records = map[types.NamespacedName]*record{}
		}
		rec = &record{}
		m.records[key] = rec
	}
	return rec
}

// forget drops everything remembered of the WebApp of key, which is gone.
func (m *memory) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.records, key)
	m.setFailing(key, false)
}

// size is how many WebApps are remembered.
func (m *memory) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.records)
}

// The resync's memory: what the last reconcile of a WebApp read, if it converged or failed.

// retrying marks a WebApp whose last reconcile returned an error, followed by its fingerprint then: the controller
// retries it with backoff, which a resync must not cut short while nothing it reads changed (during an outage every
// WebApp would be retried every period). What changed may have fixed it: that is not left to the backoff.
const retrying = "\x00retrying;"

// digest is what the memory keeps of a fingerprint or a status shape, which it only ever compares: their SHA-256
// (32 bytes where a fingerprint is about 200, for each of 10,000 WebApps), and "" for "". Callers compute it before
// taking the lock.
func digest(s string) string {
	if s == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(s))
	return string(sum[:])
}

// matches reports whether fp, not "", is the fingerprint of the last converged reconcile of key.
func (m *memory) matches(key types.NamespacedName, fp string) bool {
	d := digest(fp)
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.record(key, false)
	return fp != "" && rec != nil && rec.converged == d
}

// settled reports whether a reconcile of key ended at a fingerprint (converged, or failed and retrying): only then
// can the resync leave it alone, so only then is its fingerprint worth computing.
func (m *memory) settled(key types.NamespacedName) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.record(key, false)
	return rec != nil && rec.converged != ""
}

// leftAlone reports whether the resync leaves the WebApp of key, whose fingerprint is now fp, alone: nothing it
// reads changed since a reconcile that sent nothing, or since the failure the controller's backoff is retrying.
func (m *memory) leftAlone(key types.NamespacedName, fp string) bool {
	d := digest(fp)
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.record(key, false)
	if rec == nil {
		return false
	}
	if failedAt, ok := strings.CutPrefix(rec.converged, retrying); ok {
		return failedAt == d
	}
	return fp != "" && rec.converged == d
}

// settle records how a reconcile of key ended: with err (returned, so retried with backoff) when its inputs were
// fp, converged at fp, or neither (fp ""), for the next resync to look at again.
func (m *memory) settle(key types.NamespacedName, fp string, err error) {
	fp = digest(fp)
	if err != nil {
		fp = retrying + fp
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec := m.record(key, fp != ""); rec != nil {
		rec.converged = fp
	}
	m.setFailing(key, err != nil)
}

// setFailing keeps the failing index of key. The caller holds m.mu.
func (m *memory) setFailing(key types.NamespacedName, failing bool) {
	keys := m.failing[key.Namespace]
	switch {
	case failing && keys == nil:
		if m.failing == nil {
			m.failing = map[string]map[types.NamespacedName]struct{}{}
		}
		m.failing[key.Namespace] = map[types.NamespacedName]struct{}{key: {}}
	case failing:
		keys[key] = struct{}{}
	case keys != nil:
		delete(keys, key)
		if len(keys) == 0 {
			delete(m.failing, key.Namespace)
		}
	}
}

// failingIn lists the WebApps of namespace whose last reconcile failed and that the backoff is retrying.
func (m *memory) failingIn(namespace string) []types.NamespacedName {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := make([]types.NamespacedName, 0, len(m.failing[namespace]))
	for key := range m.failing[namespace] {
		keys = append(keys, key)
	}
	return keys
}

// The config hash's memory.

// configHash returns the config hash last computed for key, if it was computed from versions.
func (m *memory) configHash(key types.NamespacedName, versions string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.record(key, false)
	if rec == nil || rec.config.hash == "" || rec.config.versions != versions {
		return "", false
	}
	return rec.config.hash, true
}

// configHashed remembers the config hash of key, computed from versions.
func (m *memory) configHashed(key types.NamespacedName, versions, hash string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record(key, true).config = configMemo{versions: versions, hash: hash}
}

// firstDropReport says whether the conversion's drop at generation of the WebApp uid is yet to be told, and
// remembers that it is told: a reconcile on a cache behind the status write that observed the generation would
// otherwise tell it again.
func (m *memory) firstDropReport(key types.NamespacedName, uid types.UID, generation int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.record(key, true)
	id := fmt.Sprintf("%s/%d", uid, generation)
	if rec.droppedReported == id {
		return false
	}
	rec.droppedReported = id
	return true
}

// The status pace's memory.

// statusWait returns how long the status want of key, the WebApp uid, must wait: zero unless its shape equals
// that of the status last written for that WebApp less than interval ago, and it reports progress alone.
func (m *memory) statusWait(key types.NamespacedName, uid types.UID, want *webappv2ac.WebAppApplyConfiguration, interval time.Duration, now time.Time) time.Duration {
	if interval <= 0 {
		return 0
	}
	d := digest(shape(want))
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.record(key, false)
	if rec == nil || rec.status.uid != uid || rec.status.shape != d || !progressing(want) {
		return 0
	}
	return max(rec.status.at.Add(interval).Sub(now), 0)
}

// statusWritten notes a status write of key, the WebApp uid.
func (m *memory) statusWritten(key types.NamespacedName, uid types.UID, want *webappv2ac.WebAppApplyConfiguration, now time.Time) {
	var retained []webappv2.RetainedField
	if want.Status != nil {
		for _, f := range want.Status.RetainedFields {
			retained = append(retained, webappv2.RetainedField{Kind: deref(f.Kind), Field: deref(f.Field), Managers: f.Managers})
		}
	}
	d := digest(shape(want))
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record(key, true).status = statusWrite{uid: uid, shape: d, at: now, retained: retained}
}

// lastRetained is the status.retainedFields of the last status written for key, the WebApp uid, if one was.
func (m *memory) lastRetained(key types.NamespacedName, uid types.UID) ([]webappv2.RetainedField, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.record(key, false)
	if rec == nil || rec.status.uid != uid || rec.status.shape == "" {
		return nil, false
	}
	return rec.status.retained, true
}

// retainedFound remembers fields that applies of the WebApp uid let go of and other managers keep, until a status
// that lists them is stored (retainedStored).
func (m *memory) retainedFound(key types.NamespacedName, uid types.UID, fields []webappv2.RetainedField) {
	if len(fields) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.record(key, true)
	if rec.foundUID != uid {
		rec.found, rec.foundUID = nil, uid
	}
	rec.found = append(rec.found, fields...)
}

// retainedPending is what retainedFound remembers for the WebApp uid.
func (m *memory) retainedPending(key types.NamespacedName, uid types.UID) []webappv2.RetainedField {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec := m.record(key, false); rec != nil && rec.foundUID == uid {
		return slices.Clone(rec.found)
	}
	return nil
}

// retainedStored forgets what retainedFound remembers: a status that lists it is stored.
func (m *memory) retainedStored(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec := m.record(key, false); rec != nil {
		rec.found, rec.foundUID = nil, ""
	}
}

// The write decision's memory, per object written: kind, and the WebApp's key (children have its name).

// RefusedRetryAfter is how long an apply the server refused (invalid, or denied by an admission policy) is not
// sent again while neither the WebApp's desired state nor the object changes; then it is tried once more, in case
// a policy changed.
var RefusedRetryAfter = 5 * time.Minute

// entry returns the entry of the object of kind and key. The caller holds m.mu.
func (m *memory) entry(kind string, key types.NamespacedName) (sentEntry, bool) {
	rec := m.record(key, false)
	if rec == nil {
		return sentEntry{}, false
	}
	for _, e := range rec.sent {
		if e.kind == kind {
			return e.sentEntry, true
		}
	}
	return sentEntry{}, false
}

// setEntry sets the entry of the object of kind and key. The caller holds m.mu.
func (m *memory) setEntry(kind string, key types.NamespacedName, e sentEntry) {
	rec := m.record(key, true)
	for i := range rec.sent {
		if rec.sent[i].kind == kind {
			rec.sent[i].sentEntry = e
			return
		}
	}
	rec.sent = append(rec.sent, kindEntry{kind: kind, sentEntry: e})
}

// refusal returns the error the server gave for exactly want on obj (nil: the object does not exist), if it is
// still to be believed.
func (m *memory) Refusal(kind string, key types.NamespacedName, obj client.Object, want any) error {
	sum, err := ssa.HashOf(want)
	if err != nil {
		return nil
	}
	uid, rv := identity(obj)
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entry(kind, key)
	if !ok || e.refused == nil || e.uid != uid || e.rv != rv || e.hash != sum || time.Now().After(e.refused.until) {
		return nil
	}
	return e.refused.err
}

// refused remembers that the server refused the desired state hashed sum on obj (nil: the object does not exist).
func (m *memory) Refused(kind string, key types.NamespacedName, obj client.Object, sum [sha256.Size]byte, err error) {
	uid, rv := identity(obj)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setEntry(kind, key, sentEntry{uid: uid, rv: rv, hash: sum, refused: &refusal{err: err, until: time.Now().Add(RefusedRetryAfter)}})
}

func identity(obj client.Object) (types.UID, string) {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return "", ""
	}
	return obj.GetUID(), obj.GetResourceVersion()
}

// known reports whether the object was ever written or found by us (and not forgotten since).
func (m *memory) Known(kind string, key types.NamespacedName) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.entry(kind, key)
	return ok
}

// had reports whether the object existed when we last wrote or found it (not only a refused creation).
func (m *memory) Had(kind string, key types.NamespacedName) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entry(kind, key)
	return ok && e.uid != ""
}

// newest is rv, or the resourceVersion our last write of one of kinds (objects of key) returned, whichever is newer,
// for the object uid.
func (m *memory) newest(key types.NamespacedName, uid types.UID, rv string, kinds ...string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, kind := range kinds {
		if e, ok := m.entry(kind, key); ok && e.uid == uid && e.rv != "" {
			if c, err := resourceversion.CompareResourceVersion(e.rv, rv); err == nil && c > 0 {
				rv = e.rv
			}
		}
	}
	return rv
}

// behind reports whether obj, as the cache has it, may be older than what our own last write of it returned:
// its resourceVersion is lower, or cannot be compared. The resourceVersions of one resource are ordered across its
// objects, so an object that replaced the one we wrote is judged the same way (a replacement the cache shows at or
// above our write is newer than it). A refused create wrote nothing: nothing to be behind of. (ensure reads the
// server whenever this is true: it must not stay true once the cache has caught up.)
func (m *memory) Behind(kind string, key types.NamespacedName, obj client.Object) bool {
	m.mu.Lock()
	e, ok := m.entry(kind, key)
	m.mu.Unlock()
	if !ok || e.rv == "" {
		return false
	}
	c, err := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), e.rv)
	return err != nil || c < 0
}

// sentMatches reports whether sum was last sent to, or found owned on, obj as it is now.
func (m *memory) SentMatches(kind string, key types.NamespacedName, obj client.Object, sum [sha256.Size]byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entry(kind, key)
	return ok && e.refused == nil && e.uid == obj.GetUID() && e.rv == obj.GetResourceVersion() && e.hash == sum
}

// remember notes that sum was sent to, or found owned on, obj.
func (m *memory) Remember(kind string, key types.NamespacedName, obj client.Object, sum [sha256.Size]byte) {
	if obj.GetResourceVersion() == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setEntry(kind, key, sentEntry{uid: obj.GetUID(), rv: obj.GetResourceVersion(), hash: sum})
}

// forgetSent drops what is remembered of the objects written for key (children released to nobody).
func (m *memory) ForgetSent(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec := m.record(key, false); rec != nil {
		rec.sent = nil
	}
}

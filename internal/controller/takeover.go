package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// caughtUpRetry is how soon a job's pass held back by caughtUp is tried again; listRetry
// how soon the lists are read again after they failed; trustAfter how long after the
// lists a job's passes wait at most (a pod that leaves the cache and stays on the server,
// a job written faster than the watch delivers: the caches are then taken as they are).
const (
	caughtUpRetry = 200 * time.Millisecond
	listRetry     = 2 * time.Second
	listTimeout   = 20 * time.Second
	trustAfter    = 30 * time.Second
)

// caughtUp holds back a new leader's passes until its caches show what the leaders before
// it wrote.
//
// controller-runtime starts a manager's caches before it is elected (kube-controller-
// manager starts its informers after), so a standby that takes over plans from caches
// that the old leader's last writes may not have reached yet, and decided (deferral.go),
// which covers a manager's own writes, is empty in it. An occurrence the old leader
// counted missed, in a status write the new leader's job cache is behind, would get a pod
// from the new leader and be counted twice (missed, then its run); one whose pod the old
// leader created, in a pod cache that is behind, could be counted missed while that pod
// runs it; a pod the old leader counted and deleted, still pending in the pod cache, would
// be counted again.
//
// So, at its first pass, the new leader lists (a quorum read, metadata only) the jobs and
// the job pods of the namespaces it acts in: everything the leaders before it wrote. A job
// is reconciled once its cached version is the listed one, and so is each of its pods,
// cached or listed — or a read of the job or the pod says the cache is current (it changed
// since); until then, for at most trustAfter, its passes are put off for a moment. That is
// two lists per namespace set, once per leadership (a manager that loses its lease exits),
// and a read for a job or pod that changed meanwhile.
type caughtUp struct {
	// namespaces are those the manager acts in (--watch-namespaces); none: all.
	namespaces []string

	mu       sync.Mutex
	listedAt time.Time                                  // zero until the lists are read (or given up on)
	tried    time.Time                                  // when they were first tried
	failed   time.Time                                  // when they last failed
	jobs     map[types.NamespacedName]string            // resourceVersion at the list
	pods     map[types.NamespacedName]map[string]string // the job's pods at the list: name → resourceVersion
	// firstLook is when each job was first looked at; behindAt what its last look found
	// behind, while it waits ("" or absent: not looked at, or not behind).
	firstLook map[types.NamespacedName]time.Time
	behindAt  map[types.NamespacedName]string
}

// wait is how long job's pass must wait for the caches (0: not at all), given the job as
// cached and its pods as the cache lists them; it lists the API server's state first if
// that is not done yet.
func (c *caughtUp) wait(ctx context.Context, api client.Reader, job *v1alpha1.LockedCronJob, cached []corev1.Pod, now time.Time, log logr.Logger) (time.Duration, error) {
	key := types.NamespacedName{Namespace: job.Namespace, Name: job.Name}
	c.mu.Lock()
	if c.listedAt.IsZero() {
		if c.tried.IsZero() {
			c.tried = now
		}
		if !c.failed.IsZero() && now.Sub(c.failed) < listRetry && !now.Before(c.failed) {
			c.mu.Unlock()
			return wait.Jitter(listRetry, 0.5), nil
		}
		// Every worker waits on c.mu meanwhile: a list that hangs must not hold them all.
		// It is every job's, not this pass's: the pass's own deadline (--reconcile-timeout)
		// does not cut it.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), listTimeout)
		err := c.list(lctx, api)
		cancel()
		switch {
		case err != nil && now.Sub(c.tried) >= trustAfter:
			// As long as a job waits at most: the caches are taken as they are.
			c.listedAt = now
			log.Error(err, "after the election, listing to see the caches catch up failed for too long; going on with the caches", "after", trustAfter)
		case err != nil:
			// Every job's pass waits for the lists: each one that failed would count as a
			// failure in the work queue's shared rate limiter, and 5,000 of them would
			// spread the jobs' next passes over minutes. They wait here instead.
			c.failed = now
			c.mu.Unlock()
			log.Error(err, "after the election, listing to see the caches catch up; trying again", "in", listRetry)
			return wait.Jitter(listRetry, 0.5), nil
		default:
			c.listedAt = now
		}
	}
	rv, listed := c.jobs[key]
	pods := c.pods[key]
	first, looked := c.firstLook[key]
	if listed && !looked {
		if c.firstLook == nil {
			c.firstLook = map[types.NamespacedName]time.Time{}
		}
		first = now
		c.firstLook[key] = now
	}
	// A job waits at most trustAfter from its first look (one that a deep work queue
	// reaches late is still looked at once).
	late := looked && now.Sub(first) >= trustAfter
	lastBehind := c.behindAt[key]
	c.mu.Unlock()
	if !listed {
		return 0, nil // caught up before, or made after the list: the cache has it
	}
	if !late {
		behind, err := c.behind(ctx, api, job, rv, cached, pods)
		if err != nil {
			return 0, err
		}
		if behind != "" {
			c.mu.Lock()
			if c.behindAt == nil {
				c.behindAt = map[types.NamespacedName]string{}
			}
			c.behindAt[key] = behind
			c.mu.Unlock()
			return caughtUpRetry, nil
		}
	} else if lastBehind != "" {
		// Waited trustAfter for it: the caches are taken as they are.
		log.Info("after the election, the caches did not catch up with the API server in time; going on with them", "after", trustAfter, "behind", lastBehind)
	}
	c.mu.Lock()
	delete(c.jobs, key)
	delete(c.pods, key)
	delete(c.firstLook, key)
	delete(c.behindAt, key)
	c.mu.Unlock()
	return 0, nil
}

// behind names what of job the caches have not caught up with ("" when nothing): the job
// at listedRV, its pods as cached and as listed (name → resourceVersion).
func (c *caughtUp) behind(ctx context.Context, api client.Reader, job *v1alpha1.LockedCronJob, listedRV string, cached []corev1.Pod, listed map[string]string) (string, error) {
	key := types.NamespacedName{Namespace: job.Namespace, Name: job.Name}
	if job.ResourceVersion != listedRV {
		live, err := liveMeta(ctx, api, v1alpha1.GroupVersion.WithKind("LockedCronJob"), key)
		if err != nil {
			return "", err
		}
		if live == nil || live.ResourceVersion != job.ResourceVersion {
			return "job " + key.String(), nil // changed since, and not cached yet; or deleted
		}
	}
	have := make(map[string]string, len(cached))
	for i := range cached {
		have[cached[i].Name] = cached[i].ResourceVersion
	}
	names := make([]string, 0, len(have)+len(listed))
	for n := range have {
		names = append(names, n)
	}
	for n := range listed {
		if _, ok := have[n]; !ok {
			names = append(names, n)
		}
	}
	for _, name := range names {
		cachedRV, isCached := have[name]
		if listedRV, isListed := listed[name]; isCached && isListed && cachedRV == listedRV {
			continue
		}
		live, err := liveMeta(ctx, api, corev1.SchemeGroupVersion.WithKind("Pod"), types.NamespacedName{Namespace: job.Namespace, Name: name})
		if err != nil {
			return "", err
		}
		ours := false
		if live != nil {
			owner, ok := indexedJob(live)
			_, labelled := live.Labels[runpod.LabelJob]
			ours = ok && owner == job.Name && labelled // one the pod cache holds as the job's
		}
		switch {
		case !ours && isCached:
			return "pod " + name + " (gone)", nil
		case ours && (!isCached || cachedRV != live.ResourceVersion):
			return "pod " + name, nil
		}
	}
	return "", nil
}

// liveMeta reads the metadata of an object from the API server; nil if there is none.
func liveMeta(ctx context.Context, api client.Reader, gvk schema.GroupVersionKind, key types.NamespacedName) (*metav1.PartialObjectMetadata, error) {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(gvk)
	if err := api.Get(ctx, key, live); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return live, nil
}

// list reads the jobs and job pods of c's namespaces from the API server. c.mu is held.
func (c *caughtUp) list(ctx context.Context, api client.Reader) error {
	jobs := map[types.NamespacedName]string{}
	pods := map[types.NamespacedName]map[string]string{}
	namespaces := c.namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	for _, ns := range namespaces {
		err := listPages(ctx, api, v1alpha1.GroupVersion.WithKind("LockedCronJobList"), []client.ListOption{client.InNamespace(ns)},
			func(j *metav1.PartialObjectMetadata) {
				jobs[types.NamespacedName{Namespace: j.Namespace, Name: j.Name}] = j.ResourceVersion
			})
		if err != nil {
			return fmt.Errorf("listing LockedCronJobs to see the caches catch up after election: %w", err)
		}
		err = listPages(ctx, api, corev1.SchemeGroupVersion.WithKind("PodList"), []client.ListOption{client.InNamespace(ns), client.HasLabels{runpod.LabelJob}},
			func(p *metav1.PartialObjectMetadata) {
				// A job's pods as a pass lists them (the owner index).
				if name, ok := indexedJob(p); ok {
					key := types.NamespacedName{Namespace: p.Namespace, Name: name}
					if pods[key] == nil {
						pods[key] = map[string]string{}
					}
					pods[key][p.Name] = p.ResourceVersion
				}
			})
		if err != nil {
			return fmt.Errorf("listing job pods to see the caches catch up after election: %w", err)
		}
	}
	c.jobs, c.pods, c.behindAt = jobs, pods, map[types.NamespacedName]string{}
	return nil
}

// listPageSize bounds what one page of listPages holds (the objects' metadata, their
// managed fields included: about 2 KB each).
const listPageSize = 500

// listPages lists the metadata of gvk's objects a page at a time (one consistent list: the
// pages after the first are read at the first's resourceVersion), calling each for each.
func listPages(ctx context.Context, api client.Reader, gvk schema.GroupVersionKind, opts []client.ListOption, each func(*metav1.PartialObjectMetadata)) error {
	cont := ""
	for {
		page := &metav1.PartialObjectMetadataList{} // a fresh one: a decode leaves alone what the answer omits
		page.SetGroupVersionKind(gvk)
		o := append(opts[:len(opts):len(opts)], client.Limit(listPageSize))
		if cont != "" {
			o = append(o, client.Continue(cont))
		}
		if err := api.List(ctx, page, o...); err != nil {
			return err
		}
		for i := range page.Items {
			each(&page.Items[i])
		}
		if cont = page.Continue; cont == "" {
			return nil
		}
	}
}

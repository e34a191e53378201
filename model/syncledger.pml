/*
 * syncledger.pml — a Promela model of syncledger's sync protocol (DESIGN §3–5),
 * checked exhaustively by spin for the invariants I1 (chain), I2 (safety),
 * I3 (monotone) and I8 (convergence). model/check.sh runs it; RELIABILITY.md
 * ("Model check") states the bounds, the figures and how each part maps to
 * the Go code.
 *
 * What is modelled
 *   - the log (the JetStream stream): seqs 1..lhead, each the event of one
 *     partition with its modelSeq, prev and whether it ends its commit. An
 *     append is refused unless every event's prev is its partition's last seq
 *     (Nats-Expected-Last-Subject-Sequence). A commit of k > 1 partitions is
 *     one atomic batch at consecutive seqs whose parts become visible one at a
 *     time: readers may see the first parts before the last is stored.
 *   - NH hosts, each with a persisted state (HWM, a mark per partition), a
 *     cache, and while an operation runs a session (projector.Core: staged
 *     marks, staged writes, the seqs above the HWM processed so far).
 *   - operations, any number, in any interleaving: full sync (reads HWM+1 up
 *     to the head read at its start, in order); scoped sync of a partition
 *     (reads it from its mark; never moves the HWM); own commit of 1..MAXK
 *     partitions, MAXC in all (built on the persisted marks; on a chain
 *     conflict a scoped catch-up of the touched partitions then a retry, or a
 *     ConflictError that gives up).
 *   - Readies flushed after any number of records (BatchEvents), each in two
 *     steps: write the cache, then persist marks + HWM in one transaction.
 *   - crashes between any two steps: between Readies, between a Ready's file
 *     writes and its transaction, between a commit's append and its
 *     RecordOwn. The session is lost; the persisted state and the files
 *     already written stay.
 *   - the end of the workload at any point where no commit is in progress,
 *     followed by a calm full sync on every host (I8).
 *
 * Abstractions
 *   - One file per partition. Its content is named by the modelSeq prefix of
 *     the partition's chain it reflects (0: none), so "the ledger's state at
 *     the head" is, per partition, the chain's length.
 *   - A host's own uncommitted edits are not modelled: a commit's files enter
 *     the cache when it is appended; a ConflictError just ends the commit.
 *   - Not modelled (the seeded simulator covers them): delivery faults (delay,
 *     reordering, duplicates, dropped connections), retention and snapshots,
 *     rebuilds, lazy hydration, blob stores, lineage, local-change detection.
 *
 * Compile-time options
 *   NH, NP     hosts, partitions (defaults 2, 2)
 *   MAXC       commits started in the whole run (default 4)
 *   MAXK       partitions a commit touches, at most (default 2)
 *   BROKEN_SCOPED_HWM   swamp-club#3193: after a scoped sync the host persists
 *              the log's head as its HWM. Must fail I2.
 *   PROBE=n    reachability probe n (see REACH): fails when situation n arises.
 */

#ifndef NH
#define NH 2
#endif
#ifndef NP
#define NP 2
#endif
#ifndef MAXC
#define MAXC 4
#endif
#ifndef MAXK
#define MAXK 2
#endif
#define MAXSEQ (MAXC * MAXK)	/* at most this many events; ≤ 30 (bit masks) */

/* Apply-rule verdicts (projector.Verdict plus the two errors) and read modes
 * (projector.Mode). */
#define V_SKIP     1	/* rule 1: s <= mark[p].seq */
#define V_APPLY    2	/* rule 2: modelSeq == mark+1 && prev == mark.seq */
#define V_GAP      3	/* rule 3: GapError */
#define V_DIVERGED 4	/* ErrDiverged: contradicts the state */
#define M_FULL     1
#define M_SCOPED   2
#define M_OWN      3

#define BIT(i)      (1 << (i))
#define HAS(m, i)   (((m) >> (i)) & 1)

/* A violated invariant prints its name (visible in `spin -t`) and fails. */
#define CHECK(c, msg) if :: !(c) -> printf("VIOLATION: "); printf(msg); printf("\n"); assert(c) :: else -> skip fi

/* Reachability probes (model/check.sh, "probes"): built with -DPROBE=n, the
 * model fails as soon as situation n arises, which proves the search reaches
 * it: the invariants are not checked vacuously. Without PROBE they are no-ops. */
#ifdef PROBE
#define REACH(n, c) if :: PROBE == n && (c) -> printf("PROBE %d reached\n", n); assert(PROBE != n) :: else -> skip fi
#else
#define REACH(n, c) skip
#endif

/* ---------------------------------------------------------------- the log */

byte lhead;			/* the head (len): seqs 1..lhead are stored */
byte lp[MAXSEQ + 1];		/* partition of the event at seq s */
byte lms[MAXSEQ + 1];		/* its modelSeq */
byte lprev[MAXSEQ + 1];		/* its prev */
bit  lend[MAXSEQ + 1];		/* it is the last part of its commit */
byte lastSeq[NP];		/* partition's last subject seq (its chain head) */
byte lastMs[NP];		/* and that event's modelSeq: the partition's state at the head */
bit  batching;			/* an atomic batch is being stored: no other append */
byte started;			/* commits started (the bound MAXC) */

/* -------------------------------------------------------- hosts, persisted */

typedef Host {
	byte hwm;		/* statedb HWM */
	byte mseq[NP];		/* mark: seq ... */
	byte mms[NP];		/* ... and modelSeq of the last applied event */
	byte cache[NP];		/* the cache: content of partition p (modelSeq prefix) */
	int  applied;		/* ghost: bit s set = event s applied and persisted */
};
Host H[NH];

bit  over;			/* the workload is over: no operation starts any more */
byte busy;			/* hosts in the middle of a commit */

/* -------------------------------------------------------------- invariants */

/* I1 and I2 (and the cache holding at least what the index claims) for host
 * h's persisted state and cache. They change only in persistBody, writeCache,
 * a commit's append (the committed files) and the broken variant's arm, and
 * each ends with this check; appends never change a stored seq. So every
 * reachable state is checked. */
inline checkHost(h) {
	/* I1: for every partition the applied events are exactly modelSeq 1..n of
	 * its chain (the log's chain has matching prevs, checked at append). */
	for (ci : 0 .. NP - 1) {
		if
		:: H[h].mseq[ci] == 0 -> CHECK(H[h].mms[ci] == 0, "I1 mark without event")
		:: else -> CHECK(H[h].mseq[ci] <= lhead && lp[H[h].mseq[ci]] == ci && lms[H[h].mseq[ci]] == H[h].mms[ci], "I1 mark is not an event of its partition")
		fi;
		CHECK(H[h].cache[ci] >= H[h].mms[ci], "I2 cache behind the persisted mark")
	}
	for (ci : 1 .. lhead) {
		CHECK(HAS(H[h].applied, ci) == (ci <= H[h].mseq[lp[ci]]), "I1 applied events are not exactly modelSeq 1..n")
	}
	/* I2: every event with seq <= HWM is applied (or superseded) in the
	 * cache, and the HWM is a stored commit end. */
	for (ci : 1 .. H[h].hwm) {
		CHECK(ci <= lhead && HAS(H[h].applied, ci) && H[h].cache[lp[ci]] >= lms[ci], "I2 event at or below the HWM not applied")
	};
	CHECK(H[h].hwm <= lhead && (H[h].hwm == 0 || lend[H[h].hwm]), "I2 HWM is not a stored commit end");
	ci = 0
}

/* The log's own invariant (write-time contiguity): each partition's events,
 * in seq order, are modelSeq 1, 2, ... with prev the seq of the one before. */
inline checkLog() {
	for (ci : 0 .. NP - 1) {
		cm = 0; cs = 0;
		for (cj : 1 .. lhead) {
			if
			:: lp[cj] == ci ->
				CHECK(lms[cj] == cm + 1 && lprev[cj] == cs, "I1 log chain broken");
				cm = lms[cj]; cs = cj
			:: else -> skip
			fi
		}
		CHECK(cm == lastMs[ci] && cs == lastSeq[ci], "I1 log chain head");
	}
}

/* ----------------------------------------------------- the pure core (Core) */

/* classify: the apply rules of projector.Core.classify for the event at seq s,
 * against the staged view of the marks (sseq/sms) and the durable HWM. */
inline classify(h, s, v) {
	q = lp[s];
	if
	:: s <= sseq[q] ->			/* rule 1 */
		if
		:: (s == sseq[q] && lms[s] != sms[q]) || (s < sseq[q] && lms[s] >= sms[q]) -> v = V_DIVERGED
		:: else -> v = V_SKIP
		fi
	:: else ->
		if
		:: s <= H[h].hwm -> v = V_DIVERGED	/* below the HWM yet not applied */
		:: else ->
			if
			:: lms[s] == sms[q] + 1 && lprev[s] == sseq[q] -> v = V_APPLY	/* rule 2 */
			:: lms[s] > sms[q] + 1 && lprev[s] > sseq[q] -> v = V_GAP	/* rule 3 */
			:: else -> v = V_DIVERGED
			fi
		fi
	fi
}

/* stage: projector.Core.stage. Full and own records above the HWM count as
 * processed (done); scoped ones never do. Applied ones move the staged mark;
 * remote ones are written to the cache at the next flush (own ones are there
 * already: OpIndex). */
inline stage(h, mode, s, v) {
	if
	:: mode != M_SCOPED && s > H[h].hwm -> done = done | BIT(s)
	:: else -> skip
	fi;
	REACH(1, mode == M_FULL && v == V_SKIP);
	REACH(9, mode != M_OWN && v == V_APPLY && H[h].cache[q] >= lms[s]);
	if
	:: v == V_APPLY ->
		CHECK(lms[s] == sms[q] + 1 && lprev[s] == sseq[q], "I1 applied out of chain order");
		sseq[q] = s; sms[q] = lms[s]; sapp = sapp | BIT(s);
		if
		:: mode != M_OWN -> swrite = swrite | BIT(q)
		:: else -> skip
		fi
	:: else -> skip
	fi
}

/* offer: classify + stage one record read in mode (FULL or SCOPED). A gap in a
 * full read is filled from the partition's subject first (run.fillGap), staged
 * scoped. In this model delivery is in order and nothing is purged, so gaps and
 * divergence are unreachable unless the protocol is broken. */
inline offer(h, mode, s) {
	classify(h, s, v);
	if
	:: v == V_GAP && mode == M_FULL ->
		for (t : sseq[q] + 1 .. s - 1) {
			if
			:: lp[t] == q ->
				classify(h, t, v);
				CHECK(v == V_SKIP || v == V_APPLY, "I2 gap fill met a divergence");
				stage(h, M_SCOPED, t, v)
			:: else -> skip
			fi
		}
		q = lp[s];
		classify(h, s, v)
	:: else -> skip
	fi;
	CHECK(v == V_SKIP || v == V_APPLY, "I1/I2 record diverges from the state (ErrDiverged or an unfillable gap)");
	stage(h, mode, s, v)
}

/* safeHWM: projector.SafeHWM — the largest commit end H >= hwm with every seq
 * of (hwm, H] processed. */
inline safeHWM(h, res) {
	res = H[h].hwm;
	hk = H[h].hwm + 1;
	do
	:: hk <= lhead && HAS(done, hk) ->
		if
		:: lend[hk] -> res = hk
		:: else -> skip
		fi;
		hk++
	:: else -> break
	od;
	hk = 0
}

/* loadState: host.load / projector.New — a fresh session over the persisted
 * state: the staged view starts at the persisted marks, nothing processed. */
inline loadState(h) {
	for (p : 0 .. NP - 1) { sseq[p] = H[h].mseq[p]; sms[p] = H[h].mms[p] };
	done = 0; sapp = 0; swrite = 0; p = 0
}

/* ----------------------------------------------------------- the shell */

/* writeCache: the first half of host.applyReady — the Ready's files are
 * written (temp file, fsync, rename); nothing is persisted yet. The file of a
 * partition gets the content of the last staged event (last writer wins). */
inline writeCache(h) {
	for (p : 0 .. NP - 1) {
		if
		:: HAS(swrite, p) ->
			REACH(8, H[h].cache[p] > sms[p]);
			H[h].cache[p] = sms[p]
		:: else -> skip
		fi
	};
	p = 0;
	checkHost(h)
}

/* persistBody: the second half — index rows, marks and the HWM (SafeHWM over
 * the processed seqs) in one transaction, then Core.Advance. I3 is checked
 * here, the only place (besides the broken arm) where persisted marks and the
 * HWM change; I1 and I2 are checked on the result. */
inline persistBody(h) {
	safeHWM(h, nh);
	CHECK(nh >= H[h].hwm, "I3 HWM decreases");
	for (p : 0 .. NP - 1) {
		CHECK(sseq[p] >= H[h].mseq[p] && sms[p] >= H[h].mms[p], "I3 mark decreases");
		H[h].mseq[p] = sseq[p]; H[h].mms[p] = sms[p]
	};
	H[h].applied = H[h].applied | sapp;
	H[h].hwm = nh;
	done = done & ~(BIT(nh + 1) - 1);	/* Advance prunes seqs <= HWM */
	REACH(2, done != 0);
	printf("  host %d persists: HWM %d, mark seqs", h, H[h].hwm);
	for (p : 0 .. NP - 1) { printf(" p%d=%d", p, H[h].mseq[p]) };
	printf("\n"); p = 0;
	sapp = 0; swrite = 0; nh = 0; p = 0;
	checkHost(h);
	skip		/* a d_step must not end in a loop's break */
}

#ifdef BROKEN_SCOPED_HWM
/* swamp-club#3193: the no-op push after a model-scoped pull armed the remote
 * commit counter. Here: after a scoped sync the HWM is set from the log's head. */
inline arm(h) {
	printf("BROKEN: host %d arms HWM %d (the log's head) after a scoped sync\n", h, lhead);
	CHECK(lhead >= H[h].hwm, "I3 HWM decreases");
	H[h].hwm = lhead;
	checkHost(h);
	skip
}
#else
inline arm(h) { skip }
#endif

/* storePart: the server stores the next part of an atomic batch (the parts of
 * a commit in partition order, at consecutive seqs), visible at once. */
inline storePart(h) {
	do
	:: !HAS(pm, p) -> p++
	:: else -> break
	od;
	lhead++;
	lp[lhead] = p; lms[lhead] = H[h].mms[p] + 1; lprev[lhead] = H[h].mseq[p];
	lastSeq[p] = lhead; lastMs[p] = lms[lhead];
	p++;
	t = p;
	do
	:: t < NP && !HAS(pm, t) -> t++
	:: else -> break
	od;
	lend[lhead] = (t == NP);
	printf("  log: seq %d = partition %d modelSeq %d prev %d, commit end %d\n", lhead, lp[lhead], lms[lhead], lprev[lhead], lend[lhead]);
	if
	:: t == NP -> batching = 0; p = NP; checkLog()
	:: else -> skip
	fi;
	t = 0; ci = 0; cj = 0; cm = 0; cs = 0
}

/* reset: the session ends (done, crashed or failed): only the persisted
 * state and the cache remain. Locals are zeroed so that equal host states
 * are equal model states. */
inline reset() {
	for (p : 0 .. NP - 1) { sseq[p] = 0; sms[p] = 0; osq[p] = 0 };
	done = 0; sapp = 0; swrite = 0;
	upto = 0; cur = 0; s = 0; q = 0; t = 0; v = 0; nh = 0; k = 0; p = 0; sp = 0; again = 0;
	ci = 0; cj = 0; cm = 0; cs = 0
}

/* Why a whole sync is one atomic step: a host's persisted state and cache are
 * read and written by that host alone, and the log's events are immutable once
 * stored; what a sync reads is fixed by the moment it reads the log (the head
 * for a full sync; the partition's events stored so far for a scoped one). So
 * the only interleaving that matters is where that read falls among the other
 * hosts' appends, and a sync's internal steps (its Readies, a crash between
 * them) are explored inside one step with their outcomes enumerated:
 *   - the session persists a prefix of what it read (Readies flushed after any
 *     number of records, BatchEvents) and ends there if that prefix is not all
 *     (a crash, or an error ending the read);
 *   - after it, the next Ready's files may be written and not persisted (a
 *     crash between applyReady's writes and its transaction).
 * Several Readies persisted in a row reach the same state as one Ready over
 * the same records (marks move to the last applied event, SafeHWM over the
 * union of processed seqs), so one persisted prefix covers them. */

/* readFull: offer seqs cur..k of a full read, in order. */
inline readFull(h) {
	do
	:: cur <= k -> offer(h, M_FULL, cur); cur++
	:: else -> break
	od
}

/* Host.Sync (full): the fast path compares the log's last seq with the HWM;
 * otherwise it reads seqs HWM+1..head in order (Log.Read) and offers each. */
inline fullSync(h) {
	upto = lhead;
	printf("host %d: full sync, HWM %d, head %d\n", h, H[h].hwm, upto);
	if
	:: upto == H[h].hwm -> skip		/* fast path: one request */
	:: else ->
		d_step { loadState(h); cur = H[h].hwm + 1; REACH(3, !lend[upto]) };
		if
		:: final -> k = upto		/* the calm final sync: all, no crash */
		:: else -> select (k : H[h].hwm .. upto)	/* persisted up to seq k */
		fi;
		nh = 0;				/* (spin: no jump into a d_step) */
		d_step {
			readFull(h);
			if
			:: k > H[h].hwm -> writeCache(h); persistBody(h)
			:: else -> skip
			fi
		};
		if
		:: k == upto -> skip		/* read to the head */
		:: k < upto -> printf("  host %d crashes\n", h)	/* after that Ready */
		:: k < upto ->			/* crashed after writing the next Ready's files */
			printf("  host %d crashes after writing files\n", h);
			select (k : cur .. upto);
			nh = 0;
			d_step { readFull(h); writeCache(h); REACH(7, swrite != 0) }
		fi
	fi
}

/* readScoped: offer the next cur events of partition sp from seq s on. */
inline readScoped(h) {
	do
	:: cur > 0 && lp[s] == sp ->
		REACH(10, s == lhead && !lend[s]);
		offer(h, M_SCOPED, s); cur--; s++
	:: cur > 0 && lp[s] != sp -> s++
	:: else -> break
	od
}

/* Host.Sync (scoped) of partition sp: the fast path compares its last subject
 * seq with its mark; otherwise its events after the mark are read
 * (ReadPartition) and offered scoped. The HWM never moves. A scoped sync of
 * several partitions is these in a row (they share nothing but a Ready). */
inline scopedSync(h) {
	printf("host %d: scoped sync of partition %d, mark %d, partition's last seq %d\n", h, sp, H[h].mseq[sp], lastSeq[sp]);
	if
	:: lastSeq[sp] == H[h].mseq[sp] -> arm(h)	/* fast path */
	:: else ->
		d_step {
			loadState(h);
			t = 0;			/* events of sp stored after the mark */
			for (s : H[h].mseq[sp] + 1 .. lhead) {
				if
				:: lp[s] == sp -> t++
				:: else -> skip
				fi
			};
			s = H[h].mseq[sp] + 1
		};
		select (k : 0 .. t);		/* persisted: the first k of them */
		nh = 0;
		d_step {
			cur = k;
			readScoped(h);
			if
			:: k > 0 -> writeCache(h); persistBody(h)
			:: else -> skip
			fi
		};
		if
		:: k == t -> arm(h)		/* read to the partition's end */
		:: k < t -> printf("  host %d crashes\n", h)	/* after that Ready */
		:: k < t ->			/* crashed after writing the next Ready's files */
			printf("  host %d crashes after writing files\n", h);
			select (cur : 1 .. t - k);
			nh = 0;
			d_step { readScoped(h); writeCache(h) }
		fi
	fi
}

/* RecordOwn and applyReady of the host's own commit (index only: its files
 * are in the cache), or a crash after the append returned and before that. */
inline recordOwn(h) {
	if
	:: d_step {
		for (p : 0 .. NP - 1) {
			if
			:: HAS(pm, p) ->
				s = osq[p]; classify(h, s, v);
				CHECK(v == V_APPLY, "I1 own commit does not extend the persisted chain");
				stage(h, M_OWN, s, v);
				t = s			/* the commit's seq: its last part */
			:: else -> skip
			fi
		};
		persistBody(h);
		REACH(4, H[h].hwm < t);
		REACH(5, H[h].hwm == t);
		t = 0
	   }
	:: printf("  host %d crashes before recording its commit\n", h)
	fi;
	reset(); pm = 0; busy--;
	goto endidle
}

/* One attempt of Host.Commit for the partitions in pm: CommitEvents from the
 * persisted marks, then Log.Append — one atomic batch, refused if any
 * partition's last seq is not its event's prev. On a chain conflict, catchUp:
 * read the touched partitions from their marks; if a remote event changed a
 * locally changed path, ConflictError (the commit stops; local files are kept,
 * not modelled); otherwise apply them scoped, then retry. */
inline commitAttempt(h) {
	printf("host %d: commit to partitions (bit mask) %d\n", h, pm);
	d_step {
		loadState(h);
		t = 1;
		for (p : 0 .. NP - 1) {
			if
			:: HAS(pm, p) && lastSeq[p] != H[h].mseq[p] -> t = 0
			:: else -> skip
			fi
		};
		p = 0;
		if
		:: t == 1 ->
			/* accepted: consecutive seqs; the committed files are in the cache */
			cur = 0;
			for (p : 0 .. NP - 1) {
				if
				:: HAS(pm, p) -> osq[p] = lhead + 1 + cur; cur++; H[h].cache[p] = H[h].mms[p] + 1
				:: else -> skip
				fi
			};
			checkHost(h);
			cur = 0; p = 0; t = 0;
			batching = 1;
			storePart(h);		/* part 1 */
			REACH(6, again);
			t = 1
		:: else -> t = 0
		fi
	};
	if
	:: t == 1 && batching -> t = 0; goto parts	/* the other parts follow, one at a time */
	:: t == 1 && !batching -> t = 0; recordOwn(h)
	:: t == 0 -> printf("  chain conflict; a remote change hit a local path: gives up\n");
		reset(); pm = 0; busy--; goto endidle
	:: t == 0 ->				/* chain conflict, catch up */
		printf("  chain conflict: catch-up of the touched partitions\n");
		d_step {
			upto = lhead;
			for (p : 0 .. NP - 1) {
				if
				:: HAS(pm, p) ->
					for (s : H[h].mseq[p] + 1 .. upto) {
						if
						:: lp[s] == p -> offer(h, M_SCOPED, s)
						:: else -> skip
						fi
					}
				:: else -> skip
				fi
			};
			p = 0;
			writeCache(h)
		};
		if
		:: reset(); pm = 0; busy--; goto endidle	/* crash: written, not persisted */
		:: d_step { persistBody(h) };
		   if
		   :: reset(); pm = 0; busy--; goto endidle	/* crash after the catch-up */
		   :: reset(); again = 1; goto retry
		   fi
		fi
	fi
}

proctype host(byte h) {
	byte sseq[NP], sms[NP];	/* the session's staged view of the marks */
	int  done;		/* processed seqs above the HWM (Core.done + pend.done) */
	int  sapp;		/* ghost: seqs staged as applied */
	byte swrite;		/* partitions with a staged remote write */
	byte upto, cur, s, q, t, v, nh, hk, k, p, sp, pm, osq[NP];
	byte ci, cj, cm, cs;
	bit  again;		/* this commit attempt follows a catch-up */
	bit  final;		/* always 0 here: crashes and partial syncs allowed */

/* Between operations only the persisted state and the cache matter. Once
 * the workload is over the hosts rest here (a valid end state: "end" label). */
endidle:
	do
	:: atomic { !over -> fullSync(h); reset() }
	:: atomic { !over -> select (sp : 0 .. NP - 1); scopedSync(h); reset() }
	:: atomic {
		!over && started < MAXC && !batching ->
		started++; busy++;
		select (pm : 1 .. BIT(NP) - 1);	/* the commit's partitions */
		t = 0;
		for (p : 0 .. NP - 1) {		/* at most MAXK of them */
			if
			:: HAS(pm, p) && t == MAXK -> pm = pm & ~BIT(p)
			:: HAS(pm, p) && t < MAXK -> t++
			:: else -> skip
			fi
		};
		commitAttempt(h)
	   }
	od;

parts:					/* the rest of the batch, part by part */
	do
	:: atomic {
		storePart(h);
		if
		:: !batching -> recordOwn(h)
		:: else -> skip
		fi
	   }
	od;

retry:
	atomic { !batching -> commitAttempt(h) }
}

/* I8: from any state where no commit is in progress, the workload may end:
 * every host runs a calm full sync (no crash, one Ready), and then every cache
 * equals the ledger's state at the head and every HWM is the head. The final
 * syncs touch only each host's own state and nothing appends any more, so they
 * run in turn in one step here, with the hosts' code (the same locals). */
active proctype converge() {
	byte sseq[NP], sms[NP];
	int  done, sapp;
	byte swrite, upto, cur, s, q, t, v, nh, hk, k, p, ci, cj, cm, cs, hh;
	bit  final = 1;

	atomic {
		busy == 0 -> over = 1;
		printf("workload over: every host runs a full sync\n");
		for (hh : 0 .. NH - 1) { fullSync(hh) };
		d_step {
			CHECK(!batching, "I8 batch left half stored");
			for (hh : 0 .. NH - 1) {
				CHECK(H[hh].hwm == lhead, "I8 HWM is not the head after a full sync");
				for (p : 0 .. NP - 1) {
					CHECK(H[hh].cache[p] == lastMs[p], "I8 cache differs from the ledger at the head");
					CHECK(H[hh].mseq[p] == lastSeq[p] && H[hh].mms[p] == lastMs[p], "I8 mark is not the partition head")
				}
			};
			REACH(11, lhead == MAXSEQ);
			printf("every host full-synced: all at head %d\n", lhead)
		}
	}
}

init {
	byte i;
	atomic {
		for (i : 0 .. NH - 1) { run host(i) }
	}
}

package postgres

// schemaV8 is retention (store.Batch.Prune, issue 29).
//
// loom_prune drops the history entries of each thread below its version
// of befores (along the primary key: a range of it per thread) and lets go
// of the references they held, with loom_unref. Entries already gone are
// no error: a prune may be repeated.
//
// loom_unref now frees a level at a time: the commits whose references it
// drops, counted once each and locked highest seq first (the order Apply
// locks in), lose them in one statement; those left without any are
// deleted (the commits, then their search entries, as schemaV6 orders it,
// so that a fold that holds one is waited for), and their parents are the
// next level. A walk up a line is still a row at a time. The old one
// walked from each commit to the parents it freed, one reference at a
// time: a prune that freed 100,000 answers regenerated on one parent
// updated that parent 100,000 times in one transaction, each update
// reading past the row versions of those before it.
const schemaV8 = `
CREATE OR REPLACE FUNCTION loom_unref(seqs bigint[]) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	s bigint;
	r bigint;
	p bigint;
	gone bigint[];
	freed bigint := 0;
BEGIN
	seqs := array_remove(seqs, NULL);
	WHILE cardinality(seqs) > 0 LOOP
		IF cardinality(seqs) = 1 THEN
			s := seqs[1];
			UPDATE loom_commits SET refs = refs - 1 WHERE seq = s RETURNING refs, parent INTO r, p;
			EXIT WHEN NOT FOUND OR r > 0;
			DELETE FROM loom_commits WHERE seq = s;
			DELETE FROM loom_search WHERE commit_seq = s;
			freed := freed + 1;
			EXIT WHEN p IS NULL;
			seqs := ARRAY[p];
			CONTINUE;
		END IF;
		PERFORM 1 FROM loom_commits WHERE seq = ANY(seqs) ORDER BY seq DESC FOR NO KEY UPDATE;
		WITH d AS (SELECT u, count(*) AS n FROM unnest(seqs) u GROUP BY u),
		     c AS (UPDATE loom_commits c SET refs = c.refs - d.n FROM d WHERE c.seq = d.u
				RETURNING c.seq, c.refs, c.parent)
		SELECT coalesce(array_agg(c.seq) FILTER (WHERE c.refs <= 0), '{}'),
		       coalesce(array_agg(c.parent) FILTER (WHERE c.refs <= 0 AND c.parent IS NOT NULL), '{}')
		INTO gone, seqs FROM c;
		IF cardinality(gone) > 0 THEN
			DELETE FROM loom_commits WHERE seq = ANY(gone);
			DELETE FROM loom_search WHERE commit_seq = ANY(gone);
			freed := freed + cardinality(gone);
		END IF;
	END LOOP;
	RETURN freed;
END
$$;

CREATE FUNCTION loom_prune(threads bigint[], befores bigint[]) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	refs bigint[];
BEGIN
	WITH h AS (DELETE FROM loom_history h USING unnest(threads, befores) AS u(t, b)
		WHERE h.thread = u.t AND h.version < u.b RETURNING h.commit_seq)
	SELECT coalesce(array_agg(commit_seq), '{}') INTO refs FROM h WHERE commit_seq IS NOT NULL;
	RETURN loom_unref(refs);
END
$$;
`

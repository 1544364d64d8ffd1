"""An NLP harness run's steps against the corpus they trained on (rule set v9). Seed 003's rule times BERT and the
Transformer over whole epochs of a fixed synthetic corpus, and their figures count its sequences or tokens: so
every epoch's steps are the corpus's batches, in the same order, and the corpus is what the harness makes of the
arguments run_start states (model, size, corpus_size, local_batch, seq_len, seed, ranks). The grammar
(kit.results.parsers.harnesslog) holds each epoch to its own steps' sums; this rule ties the steps to the corpus:
the corpus record and each step's sequences and tokens equal the corpus recomputed here (kit.core.catalogue.
corpus_batches, the harness's own code), so tokens scaled consistently through steps, epochs and run_stop fail.
Where this kit's harness corpus files differ from the run's (run.json harness_sha256), the corpus is not recomputed:
the steps are held to the log's own corpus record and the epochs to each other, and the rule says so.
"""

from __future__ import annotations

from kit.audit.evidence import Evidence
from kit.audit.rules.findings import Finding
from kit.audit.rules.predicates import predicate
from kit.core.catalogue import CORPUS_FILES, corpus_batches, harness, harness_sha256

MAX_NAMED = 5  # mismatching steps named per run


def _recomputed(start: dict, same_code: bool, cache: dict) -> tuple[list[tuple[int, int]] | None, str]:
    """The corpus of run_start's arguments, or None and why not."""
    if not same_code:
        return None, "the run's harness corpus files are not this kit's (run.json harness_sha256)"
    if start.get("data") != "synthetic":
        return None, f"data {start.get('data')!r}: not the synthetic corpus"
    args = tuple(start.get(k) for k in ("model", "size", "corpus_size", "local_batch", "seq_len", "seed", "ranks"))
    if not all(isinstance(a, int) and not isinstance(a, bool) for a in args[2:]) or \
            not all(isinstance(a, str) for a in args[:2]):
        return None, "run_start does not state the corpus's arguments"
    if args not in cache:
        try:
            cache[args] = corpus_batches(*args)
        except ValueError as exc:
            cache[args] = str(exc)
    found = cache[args]
    return (None, f"the harness makes no corpus of them: {found}") if isinstance(found, str) else (found, "")


@predicate()
def nlp_steps_are_the_corpus(ev: Evidence, out: Finding) -> None:
    """Each epoch-timed harness run: one corpus record before its steps, and every epoch's steps (sequences,
    tokens) the corpus's batches in order, the corpus the one the harness makes of run_start's arguments."""
    cache: dict = {}
    ran = ev.meta.get("harness_sha256") if isinstance(ev.meta.get("harness_sha256"), dict) else {}
    here = harness_sha256()
    same_code = all(ran.get(name) == here.get(name) for name in CORPUS_FILES)
    unrecomputed = []
    for key, log, _figure in ev.runs():
        case = ev.cases.get(key)
        if case is None or case.impl != "harness" or not getattr(harness.MODELS.get(case.model), "epochs", False):
            continue
        out.checked += 1
        rel, events = ev.rel(log.path), ev.events(log.path)
        starts = [e.data for e in events if e.data.get("event") == "run_start"]
        corpora = [e for e in events if e.data.get("event") == "corpus"]
        steps = [e for e in events if e.data.get("event") == "step"]
        if len(starts) != 1 or len(corpora) != 1 or (steps and corpora[0].line > steps[0].line):
            out.fail(f"{key} run {log.run}: {len(corpora)} corpus record(s) (one, before the first step)", rel,
                     corpora[0].line if corpora else 1)
            continue
        said = corpora[0].data
        batches, why = _recomputed(starts[0], same_code, cache)
        if batches is None:
            unrecomputed.append(f"{key} run {log.run} ({why})")
            batches = _own_batches(steps)
        want = {"batches_per_epoch": len(batches), "sequences_per_epoch": sum(s for s, _ in batches),
                "tokens_per_epoch": sum(t for _, t in batches)}
        wrong = [f"{k} {said.get(k)!r} where the corpus has {v}" for k, v in want.items() if said.get(k) != v]
        if wrong:
            out.fail(f"{key} run {log.run}: the corpus record says " + "; ".join(wrong), rel, corpora[0].line)
        off = []
        for epoch in sorted({e.data.get("epoch") for e in steps}, key=str):
            mine = [e for e in steps if e.data.get("epoch") == epoch]
            if len(mine) != len(batches):
                off.append((mine[0].line, f"epoch {epoch!r}: {len(mine)} steps where the corpus has {len(batches)} "
                                          "batches"))
                continue
            off += [(e.line, f"epoch {epoch!r} step {i + 1}: {e.data.get('global_batch')!r} sequences, "
                             f"{e.data.get('tokens')!r} tokens where the corpus's batch {i + 1} has {s}, {t}")
                    for i, (e, (s, t)) in enumerate(zip(mine, batches, strict=True))
                    if (e.data.get("global_batch"), e.data.get("tokens")) != (s, t)]
        for line, message in off[:MAX_NAMED]:
            out.fail(f"{key} run {log.run}: {message}", rel, line)
        if len(off) > MAX_NAMED:
            out.fail(f"{key} run {log.run}: {len(off) - MAX_NAMED} more step(s) of the same kind", rel)
    if unrecomputed:
        out.note = (f"corpus not recomputed for {len(unrecomputed)} run(s), their steps held to their own corpus "
                    f"record and first epoch: {'; '.join(unrecomputed[:3])}")


def _own_batches(steps: list) -> list[tuple[int, int]]:
    """The first epoch's steps as the corpus, where it cannot be recomputed (the record is held to them, and the
    later epochs to the first)."""
    first = [e for e in steps if e.data.get("epoch") == (steps[0].data.get("epoch") if steps else None)]
    return [(e.data.get("global_batch"), e.data.get("tokens")) for e in first]

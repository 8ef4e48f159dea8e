"""monte/envs/items.py and the seal's overlap of two exams (monte/ledger/seal.py): pure functions."""

from __future__ import annotations

import random

from monte.envs.items import LeakIndex, exam_key, exam_sketch, item_key, normalize_text
from monte.ledger.records import RunRow
from monte.ledger.seal import Seal, SealKey, overlap, same_content, shared


def _items(lo: int, hi: int) -> list[dict[str, object]]:
    return [{"id": f"parity/test/{i:05d}", "prompt": f"p {10000 + i} =", "answer": "odd" if i % 2 else "even"}
            for i in range(lo, hi)]


def test_normalisation_forgets_case_width_spacing_and_invisible_characters() -> None:
    same = ["p 48213 =", "P 48213=", "p\u00a048213 =\u200b", "\uff50 \uff14\uff18\uff12\uff11\uff13 \uff1d",
            "  p   48213\t=\n", "p 48\u200d213 ="]
    assert {normalize_text(s) for s in same} == {"p 48213 ="}
    assert normalize_text("p 48213 =") != normalize_text("p 48231 =")


def test_an_exam_key_is_its_set_of_items() -> None:
    items = _items(0, 200)
    shuffled = random.Random(0).sample(items, len(items))
    renamed = [{**it, "id": f"other/{k}", "metadata": {"x": k}} for k, it in enumerate(shuffled)]
    assert exam_key(items) == exam_key(shuffled) == exam_key(renamed) == exam_key(items + items[:5])
    assert exam_key(items) != exam_key(items[:-1])
    assert item_key({"prompt": "p 10000 ="}) == item_key({"id": "x", "prompt": "P 10000=", "answer": "?"})
    chat = {"responses_create_params": {"input": [{"role": "user", "content": "p 10000 ="}]}}
    assert item_key(chat) == item_key({"messages": [{"role": "user", "content": "p 10000 ="},
                                                    {"role": "assistant", "content": "even"}]})


def _v1(items: list[dict[str, object]]) -> dict[str, object]:
    """The exam id a test read recorded before version 2: the 64 smallest keys (a bottom-k sketch)."""
    from monte.envs.items import item_keys

    keys = item_keys(items)
    return {"key": exam_key(items), "items": len(keys), "sketch": keys[:64]}


def test_an_exam_id_holds_every_key_and_overlap_is_exact() -> None:
    a = exam_sketch(_items(0, 1000))
    assert a["v"] == 2 and a["items"] == 1000 and len(a["keys"]) < 11_000  # ~11 KB per thousand items
    for lo in (0, 250, 600, 990, 1000):
        assert shared(a, exam_sketch(_items(lo, lo + 1000))) == 1000 - lo
    assert overlap(a, exam_sketch(_items(0, 1000)[::-1])) == 1.0
    assert overlap(a, exam_sketch(_items(0, 300))) == 1.0  # a subset of a sealed split is that exam
    # the rule: 5% of either side, or 10 items
    assert same_content(a, exam_sketch(_items(990, 1100)))[0]  # 10 items
    assert not same_content(a, exam_sketch(_items(991, 1191)))[0]  # 9 items, 4.5% of the smaller side
    assert same_content(exam_sketch(_items(0, 40)), exam_sketch(_items(38, 100)))[0]  # 2 items, 5% of 40
    # an older read's bottom-k sketch is still estimated, among two such sketches
    old = _v1(_items(0, 1000))
    assert abs(overlap(old, _v1(_items(250, 1250))) - 0.75) < 0.15


def test_added_items_of_smaller_keys_do_not_hide_a_sealed_exam() -> None:
    """Issue 42, case 4: all 200 sealed items plus 64 new ones whose keys sort below them. The bottom-k
    sketch of the new split holds none of the sealed keys (estimated overlap 0); the exact key set
    holds all 200, and against an older read's sketch every sealed key it kept is found."""
    from monte.envs.items import item_key

    sealed = _items(0, 200)
    low = sorted((i for i in _items(10_000, 40_000)), key=item_key)[:64]
    assert max(item_key(i) for i in low) < min(item_key(i) for i in sealed)
    steered = sealed + low
    assert overlap(_v1(sealed), _v1(steered)) == 0.0  # what the bottom-k sketches saw
    assert shared(exam_sketch(sealed), exam_sketch(steered)) == 200
    assert shared(_v1(sealed), exam_sketch(steered)) == 200  # an older read against a new one
    assert same_content(_v1(sealed), exam_sketch(steered))[0]


def test_an_lm_eval_item_is_its_document_not_its_rendered_prompt() -> None:
    doc = {"id": "gsm/test/00001", "prompt": "Q: 2+2?\nA: 4\n\nQ: 3+5?\nA:", "answer": "8",
           "lm_eval": {"doc_hash": "d" * 64, "prompt_hash": "p" * 64, "target_hash": "t" * 64}}
    refrozen = {**doc, "prompt": "Question: 1+1?\nAnswer: 2\n\nQuestion: 2+2?\nAnswer: 4\n\nQuestion: 3+5?\n"
                "Answer:", "lm_eval": {**doc["lm_eval"], "prompt_hash": "q" * 64}}  # type: ignore[dict-item]
    assert item_key(doc) == item_key(refrozen)
    assert item_key(doc) != item_key({**doc, "lm_eval": {**doc["lm_eval"], "doc_hash": "e" * 64}})  # type: ignore[dict-item]


def _read(run: str, plan: dict[str, object]) -> RunRow:
    return RunRow(run=run, experiment="old", kind="eval", status="succeeded", cohort="c", exam="parity",
                  split="test", plan=plan)


def test_a_read_recorded_before_exam_ids_is_given_one_from_its_file() -> None:
    """A read an older monte recorded holds only its split's sha256: the seal asks ``exam_of``."""
    mine = exam_sketch(_items(0, 200)[::-1])
    key = SealKey("sha-new", "s", "w", exam=mine)
    asked: list[tuple[str, str, str]] = []

    def exam_of(experiment: str, exam: str, sha: str) -> dict[str, object]:
        asked.append((experiment, exam, sha))
        return exam_sketch(_items(0, 200))

    seal = Seal(store=None, exam_of=exam_of)  # type: ignore[arg-type]  # same_exam reads no store
    old = _read("r1", {"split_sha256": "sha-old"})
    assert seal.same_exam(old, key) and asked == [("old", "parity", "sha-old")]
    assert "another order" in seal.why["r1"]
    assert not Seal(store=None).same_exam(old, key)  # type: ignore[arg-type]  # no data root: its hash alone
    other = _read("r2", {"split_sha256": "sha-x", "exam_id": exam_sketch(_items(500, 700))})
    assert not seal.same_exam(other, key)


def test_the_leak_index_finds_edited_copies_and_not_other_questions() -> None:
    idx = LeakIndex.build({"a": "7 - 3 =", "b": "Sort these words: apple, pear, fig, plum, kiwi, lime, date, yam",
                           "c": "Sort these words: cat, dog, emu, owl, ant, bee, elk, gnu"})
    assert idx.find({"input": "12 + 7 - 3 =", "output": "16"}) == set()  # a longer expression: another question
    assert idx.find({"input": "x", "output": "Q: 7-3= A: 4"}) == {"a"}
    assert idx.find({"messages": [{"role": "user", "content": "SORT these words: apple,pear,fig,plum,kiwi,lime,date"}]}) == {"b"}
    assert idx.find({"input": "Sort these words: one, two, three, four, five, six, seven, eight"}) == set()


def test_a_templated_row_sharing_a_clause_with_a_sealed_item_is_no_leak() -> None:
    """Found on NeMo Gym's reasoning_gym curriculum: two syllogisms with one conclusion share the
    template and a clause; the item's few own n-grams are half matched, but the item is not in
    the row. An edited copy of the item still is."""
    from monte.envs.items import LeakIndex

    def syllogism(p1: str, p2: str, c: str) -> str:
        return (f"Consider these statements:\n1. {p1}\n2. {p2}\n\nDoes it logically follow that:\n{c}?\n"
                "(Answer Yes or No)")

    sealed = {"t/0": syllogism("All mammals are bees", "No bees are lions", "All mammals are lions"),
              "t/1": syllogism("Some cats are dogs", "All dogs are birds", "Some cats are birds"),
              "t/2": syllogism("No fish are trees", "All trees are rocks", "No fish are rocks")}
    idx = LeakIndex.build(sealed)
    honest = {"question": syllogism("All mammals are animals", "All animals are lions", "All mammals are lions")}
    assert idx.find(honest) == set()
    edited = {"question": sealed["t/0"].replace("Consider these statements", "Look at these statements")}
    assert idx.find(edited) == {"t/0"}


def test_a_sealed_item_with_a_word_inserted_is_a_leak() -> None:
    """Issue 42's planted leaks: a word inserted inside a sealed question hid it from the check;
    it is found now. An inserted operator or number is another expression."""
    idx = LeakIndex.build({"a": "45 + 67 =", "b": "p 27611 =", "c": "reverse ammonia =", "e": "8 - 6 =",
                           "f": "6 + 5 ="})
    assert idx.find({"input": "p the 27611 ="}) == {"b"}
    assert idx.find({"input": "45 + the 67 ="}) == {"a"}
    assert idx.find({"output": "reverse the ammonia = ainomma"}) == {"c"}
    for honest in ("45 + 67 + 1 =", "12 + 45 + 67 =", "45 + 670 =", "p 27612 =", "p 2 7611 =", "8 - -6 ="):
        assert idx.find({"input": honest}) == set(), honest


def test_a_sealed_expression_padded_with_a_neutral_term_is_a_leak() -> None:
    """Issue 42's planted leaks: ``45 + 67 + 0 =`` asks what a sealed ``45 + 67 =`` asks and passed
    the check. A neutral term (``+ 0``, ``- 0``, ``* 1``, ``/ 1``, a leading ``0 +``) that leaves
    the result and the rest of the expression unchanged is dropped before comparing, on both
    sides; a term that is not neutral where it stands (``+ 0 * 3``, ``+ 0.5``, ``* 1 ^ 2``) is
    another question."""
    idx = LeakIndex.build({"a": "45 + 67 =", "f": "6 + 5 =", "g": "3 * 4 - 0 =", "h": "12 - 7 ="})
    for padded, label in (("45 + 67 + 0 =", "a"), ("0 + 45 + 67 =", "a"), ("45 - 0 + 67 =", "a"),
                          ("45 * 1 + 67 / 1 =", "a"), ("6 - 0 + 5 =", "f"), ("1 * 3 * 4 =", "g"),
                          ("3 * 4 =", "g"), ("Q: 12 - 7 + 0 = ? A: 5", "h")):
        assert idx.find({"input": padded}) == {label}, padded
    for honest in ("45 + 67 + 0 * 3 =", "45 + 67 + 0.5 =", "45 + 67 * 1 ^ 2 =", "45 + 0 + 67 + 1 =",
                   "10 - 0 + 6 + 5 =", "45 + 67 - 00 + 1 ="):
        assert idx.find({"input": honest}) == set(), honest
    # an item whose neutral terms leave no binary operator is matched as written, not as `4 =`
    # (found by bench/leak_false_positives.py: `-9 / 1 =` taken for the end of `-( 49 - 42 ) - 9 =`)
    bare = LeakIndex.build({"z": "4 + 0 =", "y": "-9 / 1 ="})
    for honest in ("p 4 = even", "-( 49 - 42 ) - 9 =", "( 63 - -89 ) - 9 ="):
        assert bare.find({"input": honest}) == set(), honest


def test_a_long_sealed_item_with_a_tenth_of_its_tokens_replaced_is_a_leak() -> None:
    """Issue 42's planted leaks: a tenth of a long sealed question's tokens replaced by other words
    broke every 8-gram the containment rule counts. A compact run holding three quarters of the
    item's tokens in order, and three quarters of its words weighted by their rarity among the
    sealed items (the template's words count little), is found; an honest item of the same
    template, half of whose own words differ, is not."""
    def sort(words: str) -> str:
        return ("Your task is to sort words in ascending or descending order using ASCII/Unicode ordering.\n\n"
                "Your output should be a comma-separated list of words, e.g. word_1, word_2, word_3\n\n"
                f"Now, sort these words in descending order and return them as a comma-separated list: {words}")

    sealed = {"s/0": sort("Only, fed, harbour, mile, quietly, tenant, apple, summit"),
              "s/1": sort("river, Zone, began, cloud, market, oak, window, paper"),
              "s/2": sort("castle, dim, eager, fossil, glow, honey, ink, jolly")}
    idx = LeakIndex.build(sealed)
    toks = sealed["s/0"].split()
    for i in (3, 11, 19, 27, 41):  # five of its 50 words, template and list alike
        toks[i] = "green"
    assert idx.find({"text": "Train on this: " + " ".join(toks)}) == {"s/0"}
    honest = sort("Only, fed, harbour, mile, lantern, velvet, copper, marble")  # half its words its own
    assert idx.find({"text": honest}) == set()
    assert idx.find({"text": sort("cedar, brook, maple, dune, ember, flint, grove, heath")}) == set()
    # an expression is its numbers and operators: a word in place of a token is a copy, another
    # number or operator (or one left out) another question
    expr = LeakIndex.build({"e": "-( -( ( -7 * -1 ) ) * 3 ) =", "f": "-( 49 - 42 ) - 9 * 3 ="})
    assert expr.find({"input": "-( -( house -7 * -1 ) ) * 3 ) ="}) == {"e"}
    for honest in ("-( -( ( -7 * -2 ) ) * 3 ) =", "-( 49 - 42 ) - 9 ="):
        assert expr.find({"input": honest}) == set(), honest


def test_a_frozen_curriculum_holds_no_neutral_padding_of_a_test_item() -> None:
    """The freeze and the leak check compare alike: chain_sum's curriculum generator asks questions
    such as ``6 - 0 + 5 =`` beside a test item ``6 + 5 =``; the freeze keeps them out of the
    curriculum (disjoint by content, neutral terms dropped), so the catalog's own curriculum is no
    leak while the same question planted by hand is one."""
    from monte.envs.freeze import SEEDS, _draw

    seen: set[str] = set()
    test, _ = _draw("chain_sum", SEEDS["test"], 200, seen)
    curriculum, dropped = _draw("chain_sum", SEEDS["curriculum"], 3000, seen)
    idx = LeakIndex.build({f"t/{k}": str(it["prompt"]) for k, it in enumerate(test)})
    assert [it["prompt"] for it in curriculum if idx.find({"input": it["prompt"]})] == []
    padded = str(test[0]["prompt"]).replace(" =", " + 0 =")
    assert idx.find({"input": padded, "output": str(test[0]["answer"])}) == {"t/0"}


def _inserted_by_every_window(idx: LeakIndex, toks: list[str]) -> set[str]:
    """The inserted-word rule as it was first written (every window of every sealed length, less
    each inner token, looked up whole): the reference the indexed lookup must agree with."""
    from monte.envs.items import INSERTED_MIN, _joins

    found: set[str] = set()
    for n in {len(form) for form in idx._whole}:
        if n < INSERTED_MIN:
            continue
        for i in range(len(toks) - n):
            if i and _joins(toks[i - 1]):
                continue
            window = toks[i:i + n + 1]
            for j in range(1, n):
                if not _joins(window[j]):
                    found.update(idx._whole.get(tuple(window[:j] + window[j + 1:]), ()))
    return found


def test_the_inserted_word_rule_finds_what_every_window_finds() -> None:
    """The inserted-word rule compares only the sealed texts that open or close a window (an
    index by their first and last two tokens); on random rows of a small vocabulary, with sealed
    texts planted with a word inserted at every place, it finds exactly what comparing every
    window of every length finds."""
    import random

    rnd = random.Random(7)
    vocab = ["a", "b", "c", "the", "+", "=", "3", "7", "("]
    for _ in range(60):
        sealed = {f"s{k}": " ".join(rnd.choice(vocab) for _ in range(rnd.randint(2, 9))) for k in range(6)}
        idx = LeakIndex.build(sealed)
        for _ in range(15):
            toks = [rnd.choice(vocab) for _ in range(rnd.randint(0, 30))]
            text = sealed[rnd.choice(sorted(sealed))].split()
            at = rnd.randint(0, len(text))
            planted = toks[:len(toks) // 2] + text[:at] + [rnd.choice(vocab)] + text[at:] + toks[len(toks) // 2:]
            for row in (toks, planted):
                assert idx._inserted(row) == _inserted_by_every_window(idx, row), (sealed, row)


def test_the_leak_check_of_long_templated_rows_takes_milliseconds() -> None:
    """Freezing NeMo Gym's reasoning_gym (knights-and-knaves puzzles of a few hundred tokens, one
    template) spent seven minutes in the inserted-word rule, which tried every window of every
    sealed length: 400 s of the 416 s of ``monte env add --server reasoning_gym``. 200 such sealed
    texts against 20 rows now take well under a second (minutes before)."""
    import random
    import time

    rnd = random.Random(3)
    names = [f"name{k}" for k in range(400)]
    template = ("A very special island is inhabited only by knights and knaves . Knights always tell the truth "
                "and knaves always lie . You meet {n} inhabitants : {who} . ")

    def puzzle() -> str:
        who = rnd.sample(names, rnd.randint(20, 60))
        says = " ".join(f"{w} says that {rnd.choice(names)} is a knave ." for w in who)
        return template.format(n=len(who), who=" , ".join(who)) + says + " So who is a knight and who is a knave ?"

    idx = LeakIndex.build({f"test/{k}": puzzle() for k in range(200)})
    rows = [{"question": puzzle()} for _ in range(20)]
    start = time.process_time()
    assert [idx.find(r) for r in rows] == [set()] * 20
    assert time.process_time() - start < 2.0
    planted = idx.texts["test/5"][:40] + ["the"] + idx.texts["test/5"][40:]
    assert idx.find({"question": " ".join(planted)}) == {"test/5"}

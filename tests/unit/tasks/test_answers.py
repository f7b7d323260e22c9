"""Final-answer extraction: every rule of tsrl/tasks/answers.py as a row of a table, found and refused."""

from __future__ import annotations

import pytest

from tsrl.tasks.answers import (
    Extracted,
    boxed_contents,
    extract_choice,
    extract_integer,
    integer_from,
    integer_span,
    verify_choice,
    verify_integer,
)

# (text, value, reason) — reason is the exact phrase for refusals, "" for a found answer.
INTEGER_CASES = [
    pytest.param(r"So the total is \boxed{42}.", 42, "", id="plain-box"),
    pytest.param(r"\boxed{007}", 7, "", id="leading-zeros"),
    pytest.param(r"\boxed{ 7 }", 7, "", id="spaces-inside-box"),
    pytest.param(r"$\boxed{0}$", 0, "", id="zero-is-an-answer"),
    pytest.param(r"\fbox{999}", 999, "", id="fbox-upper-bound"),
    pytest.param(r"first \boxed{12}, checking again \boxed{012}", 12, "", id="two-boxes-equal"),
    pytest.param(r"\boxed{7} or maybe \boxed{8}", None, "two different boxed answers: 7, 8", id="two-boxes-differ"),
    pytest.param(
        r"\boxed{1} \boxed{2} \boxed{3}", None, "three different boxed answers: 1, 2, 3", id="three-boxes-differ"
    ),
    pytest.param(
        r"\boxed{1} \boxed{2} \boxed{3} \boxed{4}",
        None,
        "4 different boxed answers: 1, 2, 3, 4",
        id="four-boxes-differ-counted-in-digits",
    ),
    pytest.param(
        r"\boxed{n} \boxed{m}", None, "two different boxed answers: n, m", id="unparsed-boxes-differ-by-their-text"
    ),
    pytest.param(r"The answer is 5, so \boxed{6}", 6, "", id="box-beats-marker"),
    pytest.param("I could not solve this problem.", None, "no answer found", id="no-answer"),
    pytest.param("", None, "no answer found", id="empty-text"),
    pytest.param(
        "Adding 17 and 25 gives 42, then we double it to 84.",
        None,
        "no answer found",
        id="numbers-in-reasoning-without-marker",
    ),
    pytest.param(r"\boxed{x = 42}", 42, "", id="text-around-number-in-box"),
    pytest.param(r"\boxed{42 \text{ degrees}}", 42, "", id="text-unit-in-box"),
    pytest.param(r"\boxed{42^\circ}", 42, "", id="degrees-in-box"),
    pytest.param(r"\boxed{\text{42}}", 42, "", id="text-wrapper-in-box"),
    pytest.param(r"\boxed{\mathrm{42}\,\mathrm{cm}}", 42, "", id="mathrm-and-thin-space"),
    pytest.param("The answer is 42 apples.", 42, "", id="text-after-marker-number"),
    pytest.param("Final Answer: The final answer is $42$. I hope it is correct.", 42, "", id="minerva-format"),
    pytest.param("**Answer:** 17", 17, "", id="markdown-answer-label"),
    pytest.param("answer: x = 23", 23, "", id="marker-with-variable"),
    pytest.param("The answer is 3 at first glance. Rechecking... The answer is 42.", 42, "", id="last-marker-wins"),
    pytest.param("answer: X = 5", 5, "", id="marker-with-capital-x-variable"),
    pytest.param("The answer is 42\n+ 3 more lines\nof notes.", 42, "", id="marker-tail-stops-at-its-line-end"),
    pytest.param(
        "Let me find the answer: first, 17 + 25 = 42.",
        None,
        "no answer found",
        id="marker-followed-by-prose-is-skipped",
    ),
    pytest.param(
        "the answer is 8. Wait, the answer is not obvious.", 8, "", id="prose-marker-falls-back-to-earlier-one"
    ),
    pytest.param(r"\boxed{7/2}", None, "a fraction where an integer is required: 7/2", id="fraction-slash"),
    pytest.param(
        r"\boxed{\frac{7}{2}}",
        None,
        r"a fraction where an integer is required: \frac{7}{2}",
        id="fraction-frac-nested-braces",
    ),
    pytest.param(
        r"\boxed{\dfrac{14}{2}}",
        None,
        r"a fraction where an integer is required: \dfrac{14}{2}",
        id="fraction-dfrac-even-if-integer",
    ),
    pytest.param(
        r"The answer is $\frac{7}{2}$",
        None,
        r"a fraction where an integer is required: \frac{7}{2}",
        id="fraction-after-marker",
    ),
    pytest.param(r"\boxed{42.0}", 42, "", id="decimal-zero"),
    pytest.param(r"\boxed{42.00}", 42, "", id="decimal-zeros"),
    pytest.param(r"\boxed{4.5}", None, "not an integer: 4.5", id="decimal-non-integer"),
    pytest.param(r"\boxed{.5}", None, "not an integer: .5", id="leading-point-decimal-kept"),
    pytest.param(r"\boxed{.0}", 0, "", id="leading-point-zero-is-zero"),
    pytest.param(r"\boxed{-.0}", 0, "", id="negative-leading-point-zero-is-zero"),  # once crashed on int("-")
    pytest.param("The answer is -.0", 0, "", id="negative-leading-point-zero-after-marker"),
    pytest.param("The answer is 4.5.", None, "not an integer: 4.5", id="decimal-after-marker"),
    pytest.param(r"\boxed{1,000}", None, "outside 0-999: 1000", id="thousands-comma-then-range"),
    pytest.param(r"\boxed{-5}", None, "outside 0-999: -5", id="negative"),
    pytest.param("answer: -5", None, "outside 0-999: -5", id="negative-after-marker"),
    pytest.param("\\boxed{\u22125}", None, "outside 0-999: -5", id="unicode-minus-read-as-minus"),
    pytest.param(r"\boxed{1200}", None, "outside 0-999: 1200", id="above-range"),
    pytest.param(r"\boxed{3, 4}", None, "more than one number: 3, 4", id="two-numbers-in-box"),
    pytest.param(r"\boxed{2^{10}}", None, "more than one number: 2^{10}", id="power-is-two-numbers"),
    pytest.param("The answer is 2^{10}", None, "more than one number: 2^{10}", id="power-after-marker"),
    pytest.param("answer is 10^2", None, "more than one number: 10^2", id="bare-power-after-marker"),
    pytest.param("The answer is 2**10.", None, "more than one number: 2**10", id="python-power-after-marker"),
    pytest.param(r"The answer is 3 \times 4", None, r"more than one number: 3 \times 4", id="product-after-marker"),
    pytest.param("The answer is 12 - 5.", None, "more than one number: 12 - 5", id="difference-after-marker"),
    pytest.param(r"The answer is 30^\circ.", 30, "", id="degrees-after-marker"),
    pytest.param("The answer is 42! Done.", 42, "", id="exclamation-is-not-a-factorial"),
    pytest.param("The answer is 7 - that is all.", 7, "", id="dash-before-prose-is-not-a-minus"),
    pytest.param(r"\boxed{n}", None, "no number in the answer: n", id="box-without-number"),
    pytest.param(r"\boxed{x.}", None, "no number in the answer: x", id="trailing-period-dropped-from-reason"),
    pytest.param(r"\boxed{n^\circ}", None, "no number in the answer: n", id="noise-dropped-from-reason"),
    pytest.param(r"\boxed{X}", None, "no number in the answer: X", id="capital-x-box-is-not-empty"),
    pytest.param(r"\boxed{} and then \boxed{5}", 5, "", id="empty-box-skipped"),
    pytest.param(r"so the result is \boxed{4", None, r"an unclosed \boxed{ and no other answer", id="unclosed-box"),
    pytest.param("The answer is 12. Writing it out: \\boxed{1", 12, "", id="unclosed-box-falls-back-to-marker"),
    pytest.param(r"\boxed{\{5\}}", 5, "", id="escaped-braces-do-not-close-the-box"),
    pytest.param(r"\boxed{\{5}", 5, "", id="escaped-brace-does-not-open-a-level"),
]


@pytest.mark.parametrize("text, value, reason", INTEGER_CASES)
def test_extract_integer(text: str, value: int | None, reason: str) -> None:
    assert extract_integer(text) == Extracted(value, reason)


def test_extract_integer_range_is_a_parameter() -> None:
    assert extract_integer(r"\boxed{1,000}", high=10**6) == Extracted(1000, "")
    assert extract_integer(r"\boxed{-5}", low=-10, high=10) == Extracted(-5, "")
    assert extract_integer(r"\boxed{11}", low=1, high=10) == Extracted(None, "outside 1-10: 11")
    assert extract_integer("\\boxed{\u22125}", low=-10, high=10) == Extracted(-5, "")


def test_extract_integer_accepts_a_one_value_range() -> None:
    assert extract_integer(r"\boxed{5}", low=5, high=5) == Extracted(5, "")


def test_extract_integer_refuses_an_empty_range() -> None:
    with pytest.raises(ValueError, match="low=5 is above high=3"):
        extract_integer(r"\boxed{4}", low=5, high=3)


CHOICE_CASES = [
    pytest.param(r"\boxed{B}", "B", "", id="box-letter"),
    pytest.param(r"\boxed{(B)}", "B", "", id="box-parenthesised"),
    pytest.param(r"$\boxed{\text{B}}$", "B", "", id="box-text-wrapper"),
    pytest.param(r"\boxed{c}", "C", "", id="box-lowercase"),
    pytest.param(r"\boxed{B) 3.2 eV}", "B", "", id="box-letter-with-description"),
    pytest.param(r"\boxed{A} ... \boxed{(A)}", "A", "", id="boxes-agree"),
    pytest.param(r"\boxed{A} ... \boxed{C}", None, "two different boxed answers: A, C", id="boxes-differ"),
    pytest.param(r"\boxed{A, C}", None, "more than one letter: A, C", id="box-lists-two-letters"),
    pytest.param(r"\boxed{3.2 eV}", None, "not a choice letter: 3.2 eV", id="box-without-letter"),
    pytest.param("Thus, the answer is (B).", "B", "", id="answer-is-parenthesised"),
    pytest.param("Answer: B", "B", "", id="answer-colon"),
    pytest.param("Answer: (b)", "B", "", id="answer-lowercase-in-parens"),
    pytest.param("answer: d", "D", "", id="answer-lowercase-bare-at-line-end"),
    pytest.param("**Final Answer:** **C**", "C", "", id="markdown"),
    pytest.param("The correct answer is option D because of symmetry.", "D", "", id="option-word"),
    pytest.param("The answer is A or B.", None, "more than one letter: A, B", id="marker-lists-two-letters"),
    pytest.param("**Answer: A or B**", None, "more than one letter: A, B", id="bold-marker-lists-two-letters"),
    pytest.param("The answer is C or X.", None, "more than one letter: C, X", id="marker-lists-a-letter-and-x"),
    pytest.param("The answer is (C) or C.", "C", "", id="same-letter-twice-is-one-answer"),
    pytest.param("Final answer: d\nThat is all.\nThanks.", "D", "", id="lowercase-letter-ends-its-line-not-the-text"),
    pytest.param("The answer is B, and D is a distractor.", "B", "", id="later-letter-in-prose-ignored"),
    pytest.param("Answer: But wait, we have to check the units.", None, "no answer found", id="but-is-not-letter-b"),
    pytest.param("The answer is a bit subtle.\nSo the answer is C.", "C", "", id="article-a-is-not-a-letter"),
    pytest.param("The answer is a bit subtle here.", None, "no answer found", id="article-a-alone"),
    pytest.param("The answer is A at first. No: the answer is (C).", "C", "", id="last-marker-wins"),
    pytest.param("After elimination:\n(B)", "B", "", id="last-line-parenthesised"),
    pytest.param("After elimination:\nB.", "B", "", id="last-line-with-period"),
    pytest.param("After elimination:\n**B**", "B", "", id="last-line-bold"),
    pytest.param("Eliminating the rest:\nX", None, "not one of ABCD: X", id="last-line-capital-x"),
    pytest.param("", None, "no answer found", id="empty-text"),
    pytest.param("  \n\t\n", None, "no answer found", id="blank-lines-only"),
    pytest.param(
        "B is tempting, but the data point elsewhere.", None, "no answer found", id="letter-in-prose-is-not-an-answer"
    ),
    pytest.param("Answer: E", None, "not one of ABCD: E", id="letter-outside-choices"),
    pytest.param(r"\boxed{E}", None, "not one of ABCD: E", id="boxed-letter-outside-choices"),
    pytest.param(r"the choice is \boxed{(B", None, r"an unclosed \boxed{ and no other answer", id="unclosed-box"),
]


@pytest.mark.parametrize("text, value, reason", CHOICE_CASES)
def test_extract_choice(text: str, value: str | None, reason: str) -> None:
    assert extract_choice(text) == Extracted(value, reason)


def test_extract_choice_letters_is_a_parameter() -> None:
    assert extract_choice("Answer: E", letters="ABCDE") == Extracted("E", "")
    assert extract_choice("Answer: (j)", letters="abcdefghij") == Extracted("J", "")
    with pytest.raises(ValueError, match="letters only"):
        extract_choice("Answer: A", letters="A-D")


VERIFY_INTEGER_CASES = [
    pytest.param(r"\boxed{042}", 42, 1.0, id="match"),
    pytest.param(r"\boxed{41}", 42, 0.0, id="wrong"),
    pytest.param(r"\boxed{\frac{84}{2}}", 42, 0.0, id="fraction-never-matches"),
    pytest.param("I think it is 42 but I am unsure.", 42, 0.0, id="no-marker-no-credit"),
]


@pytest.mark.parametrize("text, answer, reward", VERIFY_INTEGER_CASES)
def test_verify_integer(text: str, answer: int, reward: float) -> None:
    assert verify_integer(text, answer) == reward


VERIFY_CHOICE_CASES = [
    pytest.param("The answer is (C).", "C", 1.0, id="match"),
    pytest.param("The answer is (C).", "c", 1.0, id="reference-lowercase"),
    pytest.param("The answer is (B).", "C", 0.0, id="wrong"),
    pytest.param(r"\boxed{B} \boxed{C}", "C", 0.0, id="hedging-gets-nothing"),
]


@pytest.mark.parametrize("text, answer, reward", VERIFY_CHOICE_CASES)
def test_verify_choice(text: str, answer: str, reward: float) -> None:
    assert verify_choice(text, answer) == reward


def test_verify_integer_accepts_the_top_of_the_range() -> None:
    assert verify_integer(r"\boxed{999}", 999) == 1.0


def test_verify_choice_passes_letters_to_the_extractor() -> None:
    assert verify_choice("Answer: E", "E", letters="ABCDE") == 1.0


def test_integer_from_names_an_empty_candidate() -> None:
    """A candidate that is only LaTeX dressing; extract_integer never passes one, the box filter drops it."""
    assert integer_from(r"$\,$", 0, 999) == Extracted(None, "empty answer")


def test_boxed_contents_reports_unclosed_as_a_bool() -> None:
    assert boxed_contents(r"\boxed{1} and \fbox{2}") == (["1", "2"], False)
    assert boxed_contents(r"\boxed{1} and \boxed{2") == (["1"], True)


def test_verify_refuses_a_reference_that_nothing_could_match() -> None:
    with pytest.raises(ValueError, match="outside 0-999"):
        verify_integer(r"\boxed{1000}", 1000)
    with pytest.raises(ValueError, match="not one of ABCD"):
        verify_choice("Answer: E", "E")


@pytest.mark.parametrize(
    "tail, span",
    [
        ("$42$ is it", "42"),
        ("$$42$$ done", "42"),  # display math: the extra $ are stripped
        ("$X = 5$", "X = 5"),  # only $ are stripped, not a variable's letter
        ("\\(7\\) so", "7"),
        ("$x$", None),  # math without a digit is no number
        ("\\(x\\)", None),
        ("$12", "12"),  # an unclosed $: the rest
        ("**42**", "42"),  # markdown emphasis before the number
        ("_ 5", "5"),
        ("-3.", "-3"),
        ("2^{10} apples", "2^{10}"),  # a number and its operators are one expression
        ("3 \\times 4 = 12", "3 \\times 4"),
        ("10^2.", "10^2"),  # the sentence's full stop is not part of the last operand
        ("10^2.5 then", "10^2.5"),  # a decimal operand is
        ("none", None),
    ],
)
def test_integer_span_takes_the_number_after_answer_is(tail, span):
    assert integer_span(tail) == span

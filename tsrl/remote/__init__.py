"""The OpenAI-compatible judge (judge=openai): its settings, transports, rate limits, hedging, constrained answers
and start-up check; and the local judge servers of `tsrl-serve-judge`."""

from tsrl.remote import openai_judge  # noqa: F401 (registers judge=openai whichever of these modules is imported)

"""The core: the instructions an operation yields, the runners that carry them out
(threads or asyncio), the client context, and the operations of offers, plans,
launches, listings and waits.
"""

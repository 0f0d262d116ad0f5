"""Finding memories: text analysis, the keyword postings, BM25, the lexical and dense candidate queries."""

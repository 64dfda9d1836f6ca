-- Shapes outside the public suite, to measure the tile heuristic against the
-- explored best where no tuning table has an entry (`attnbwd explore`).
local function case(b, h, t, p)
  return { problem = "softmax_dropout_bwd", batch = b, heads = h, seq_len = t, p_dropout = p,
           atol = 1e-5, rtol = 1e-5 }
end
return {
  case(2, 8, 1024, 0.1),
  case(1, 16, 777, 0.0),
  case(4, 12, 384, 0.1),
  case(8, 8, 64, 0.1),
  case(1, 4, 8192, 0.1),
  case(2, 16, 197, 0.1),
  case(16, 4, 1000, 0.0),
  case(1, 32, 2000, 0.1),
  case(32, 16, 128, 0.1),
  case(3, 6, 3000, 0.05),
}

# frozen_string_literal: true

# The gem's version: the libreserve release whose reserve.h it was written
# for.
module Libreserve
  VERSION = "0.1.0"
end

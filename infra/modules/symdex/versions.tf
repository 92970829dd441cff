terraform {
  required_version = ">= 1.9" # validations that name other variables
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.40"
    }
  }
}
